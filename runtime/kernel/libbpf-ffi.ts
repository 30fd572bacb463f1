/**
 * koffi declarations of the libbpf 1.x (Debian `libbpf.so.1`) functions Hive uses, under
 * libbpf's own names. Pointers are bigints (koffi 3); `void *` buffer arguments accept
 * Buffers, which libbpf reads and writes in place. libbpf 1.x returns negative errno codes
 * (or NULL with errno set): `check`/`checkPointer` convert that contract, in one place,
 * into HiveErrors.
 */
import { existsSync, readFileSync } from "node:fs";
import koffi, { type LibraryHandle } from "koffi";
import { HiveError, type HiveErrorCode } from "../../api/errors.ts";

export type Pointer = bigint;

function declare(lib: LibraryHandle) {
  const printFn = koffi.proto("int hive_libbpf_print_fn(int level, const char *fmt, void *args)");
  // libbpf.h's struct bpf_kprobe_multi_opts (the trailing `size_t :0` pads it to 48 bytes).
  koffi.struct("bpf_kprobe_multi_opts", {
    sz: "size_t",
    syms: "const char **",
    addrs: "void *",
    cookies: "void *",
    cnt: "size_t",
    retprobe: "bool",
  });
  return {
    printFn,
    libbpf_set_print: lib.func("void *libbpf_set_print(hive_libbpf_print_fn *fn)"),
    bpf_object__open_file: lib.func("void *bpf_object__open_file(const char *path, void *opts)"),
    bpf_object__load: lib.func("int bpf_object__load(void *obj)"),
    bpf_object__close: lib.func("void bpf_object__close(void *obj)"),
    bpf_object__btf: lib.func("void *bpf_object__btf(void *obj)"),
    bpf_object__find_map_by_name: lib.func("void *bpf_object__find_map_by_name(void *obj, const char *name)"),
    bpf_object__find_program_by_name: lib.func(
      "void *bpf_object__find_program_by_name(void *obj, const char *name)",
    ),
    bpf_program__set_autoload: lib.func("int bpf_program__set_autoload(void *prog, bool autoload)"),
    bpf_program__fd: lib.func("int bpf_program__fd(void *prog)"),
    bpf_program__attach: lib.func("void *bpf_program__attach(void *prog)"),
    bpf_program__attach_iter: lib.func("void *bpf_program__attach_iter(void *prog, void *opts)"),
    bpf_iter_create: lib.func("int bpf_iter_create(int link_fd)"),
    bpf_link__fd: lib.func("int bpf_link__fd(void *link)"),
    bpf_program__attach_kprobe_multi_opts: lib.func(
      "void *bpf_program__attach_kprobe_multi_opts(void *prog, const char *pattern, const bpf_kprobe_multi_opts *opts)",
    ),
    bpf_map__fd: lib.func("int bpf_map__fd(void *map)"),
    bpf_map__set_max_entries: lib.func("int bpf_map__set_max_entries(void *map, uint32_t max_entries)"),
    bpf_map__set_pin_path: lib.func("int bpf_map__set_pin_path(void *map, const char *path)"),
    bpf_map__unpin: lib.func("int bpf_map__unpin(void *map, const char *path)"),
    bpf_map__initial_value: lib.func("void *bpf_map__initial_value(void *map, _Out_ size_t *size)"),
    bpf_link__pin: lib.func("int bpf_link__pin(void *link, const char *path)"),
    bpf_link__unpin: lib.func("int bpf_link__unpin(void *link)"),
    bpf_link__open: lib.func("void *bpf_link__open(const char *path)"),
    bpf_link__destroy: lib.func("int bpf_link__destroy(void *link)"),
    bpf_link__disconnect: lib.func("void bpf_link__disconnect(void *link)"),
    bpf_obj_get: lib.func("int bpf_obj_get(const char *path)"),
    bpf_obj_pin: lib.func("int bpf_obj_pin(int fd, const char *path)"),
    bpf_obj_get_info_by_fd: lib.func("int bpf_obj_get_info_by_fd(int fd, void *info, _Inout_ uint32_t *len)"),
    bpf_map_update_elem: lib.func(
      "int bpf_map_update_elem(int fd, const void *key, const void *value, uint64_t flags)",
    ),
    bpf_map_lookup_elem: lib.func("int bpf_map_lookup_elem(int fd, const void *key, void *value)"),
    bpf_map_delete_elem: lib.func("int bpf_map_delete_elem(int fd, const void *key)"),
    bpf_map_lookup_batch: lib.func(
      "int bpf_map_lookup_batch(int fd, void *in_batch, void *out_batch, void *keys, void *values, _Inout_ uint32_t *count, void *opts)",
    ),
    bpf_map_get_next_key: lib.func("int bpf_map_get_next_key(int fd, const void *key, void *next)"),
    libbpf_num_possible_cpus: lib.func("int libbpf_num_possible_cpus()"),
    btf__load_vmlinux_btf: lib.func("void *btf__load_vmlinux_btf()"),
    btf__find_by_name_kind: lib.func(
      "int btf__find_by_name_kind(void *btf, const char *name, uint32_t kind)",
    ),
    btf__type_by_id: lib.func("void *btf__type_by_id(void *btf, uint32_t id)"),
    btf__name_by_offset: lib.func("const char *btf__name_by_offset(void *btf, uint32_t offset)"),
    btf__free: lib.func("void btf__free(void *btf)"),
    btf__parse_split: lib.func("void *btf__parse_split(const char *path, void *base)"),
  };
}

export type Libbpf = ReturnType<typeof declare>;

let cached: Libbpf | undefined;

/** The libbpf bindings, loaded once per thread. */
export function libbpf(): Libbpf {
  if (cached) return cached;
  let lib: LibraryHandle;
  try {
    lib = koffi.load("libbpf.so.1");
  } catch (cause) {
    throw new HiveError("LibbpfMissing", "cannot load libbpf.so.1", {
      object: "libbpf.so.1",
      hint: "install Debian's libbpf1 package (apt-get install libbpf1)",
      cause,
    });
  }
  cached = declare(lib);
  return cached;
}

const libc = { lib: undefined as LibraryHandle | undefined };

/** libc: vsnprintf (libbpf's va_list messages) and what the ring reader maps and polls with. */
export function libcFns() {
  libc.lib ??= koffi.load("libc.so.6");
  return {
    vsnprintf: libc.lib.func("int vsnprintf(_Out_ char *buf, size_t size, const char *fmt, void *args)"),
    mmap: libc.lib.func("void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)"),
    munmap: libc.lib.func("int munmap(void *addr, size_t length)"),
    poll: libc.lib.func("int poll(void *fds, uint64_t nfds, int timeout)"),
    sysconf: libc.lib.func("long sysconf(int name)"),
    open_by_handle_at: libc.lib.func("int open_by_handle_at(int mount_fd, void *handle, int flags)"),
    close: libc.lib.func("int close(int fd)"),
    malloc_trim: libc.lib.func("int malloc_trim(size_t pad)"),
  };
}

export function errnoName(code: number): string {
  const positive = Math.abs(code);
  for (const [name, value] of Object.entries(koffi.os.errno)) if (value === positive) return name;
  return `errno ${positive}`;
}

/**
 * Visits every entry of a map, key by key (works on every kernel). `key` and `value` are
 * reused from one entry to the next: copy what must outlive the call.
 */
export function forEachMapEntry(
  fd: number,
  keySize: number,
  valueSize: number,
  visit: (key: Buffer, value: Buffer) => void,
): void {
  const lib = libbpf();
  const key = Buffer.alloc(keySize);
  const next = Buffer.alloc(keySize);
  const value = Buffer.alloc(valueSize);
  let first = true;
  while ((lib.bpf_map_get_next_key(fd, first ? null : key, next) as number) === 0) {
    first = false;
    next.copy(key);
    if ((lib.bpf_map_lookup_elem(fd, key, value) as number) === 0) visit(key, value);
  }
}

/** Detaches a pinned link for good: its pin removed, then its descriptor (the last reference) closed. */
export function detachLink(lib: Libbpf, link: Pointer): void {
  lib.bpf_link__unpin(link);
  lib.bpf_link__destroy(link);
}

/**
 * Ends this process's hold on `link`: with `keep` its pin keeps it attached for the next agent,
 * else it is unpinned and detached (unpinning a link that was never pinned changes nothing).
 */
export function releaseLink(lib: Libbpf, link: Pointer, keep: boolean): void {
  if (keep) lib.bpf_link__disconnect(link);
  else lib.bpf_link__unpin(link);
  lib.bpf_link__destroy(link);
}

/**
 * A BPF link pinned at `path`, or null when nothing is pinned there or what is pinned is not
 * a link (libbpf's bpf_link__open takes any pinned object: a map squatting on a link's name
 * would pass for an attached program).
 */
export function openPinnedLink(path: string): Pointer | null {
  if (!existsSync(path)) return null;
  const lib = libbpf();
  const link = lib.bpf_link__open(path) as Pointer | null;
  if (!link) return null;
  let info = "";
  try {
    info = readFileSync(`/proc/self/fdinfo/${lib.bpf_link__fd(link) as number}`, "utf8");
  } catch {
    // Unreadable fdinfo: not provably a link.
  }
  if (/^link_type:/m.test(info)) return link;
  lib.bpf_link__destroy(link); // closes the descriptor; nothing was attached through it
  return null;
}

/** Converts libbpf's negative-errno return into a HiveError. */
export function check(
  result: number,
  what: string,
  details: { object?: string; hint?: string; code?: HiveErrorCode } = {},
): number {
  if (result >= 0) return result;
  throw errnoError(-result, what, details);
}

/** Converts libbpf's NULL-with-errno return into a HiveError. */
export function checkPointer(
  pointer: Pointer | null,
  what: string,
  details: { object?: string; hint?: string; code?: HiveErrorCode } = {},
): Pointer {
  if (pointer !== null && pointer !== 0n) return pointer;
  throw errnoError(koffi.errno(), what, details);
}

export function errnoError(
  errno: number,
  what: string,
  details: { object?: string; hint?: string; code?: HiveErrorCode },
): HiveError {
  const name = errnoName(errno);
  const code = details.code ?? (errno === 1 || errno === 13 ? "PermissionDenied" : "BpfCallFailed");
  const hint =
    details.hint ??
    (code === "PermissionDenied"
      ? "run as root or with CAP_BPF + CAP_PERFMON + CAP_SYS_RESOURCE"
      : undefined);
  return new HiveError(code, `${what} failed: ${name}`, { object: details.object, hint, errno });
}
