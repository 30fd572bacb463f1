/**
 * The program's read-only configuration (`const volatile` globals in bpf/hive.bpf.c), written
 * into the object's .rodata before load, at the offsets its BTF gives: the verifier then
 * sees them as constants.
 */
import koffi from "koffi";
import { HiveError } from "../../api/errors.ts";
import { datasecOffsets } from "./kernel-btf.ts";
import { checkPointer, libbpf, type Pointer } from "./libbpf-ffi.ts";

export function setRodata(obj: Pointer, values: Record<string, number | bigint>): void {
  const lib = libbpf();
  const btf = checkPointer(lib.bpf_object__btf(obj) as Pointer | null, "reading the object's BTF");
  const offsets = datasecOffsets(btf, ".rodata");
  const map = checkPointer(
    lib.bpf_object__find_map_by_name(obj, ".rodata") as Pointer | null,
    "finding .rodata",
  );
  const size = [0];
  const data = checkPointer(
    lib.bpf_map__initial_value(map, size) as Pointer | null,
    "bpf_map__initial_value",
  );
  const view = new DataView(koffi.view(data, size[0] ?? 0));
  for (const [name, value] of Object.entries(values)) {
    const at = offsets.get(name);
    if (!at)
      throw new HiveError("BpfObjectMissing", `the BPF object lacks ${name}`, {
        object: name,
        hint: "rebuild bpf/hive.bpf.o",
      });
    if (at.size === 8) view.setBigUint64(at.offset, BigInt(value), true);
    else view.setUint32(at.offset, Number(value), true);
  }
}
