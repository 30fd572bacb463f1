/* Tight syscall loops for the kernel benchmark (bench/kernel.ts): the cost of the calls
 * that run inode_permission, and of fork + exec (the process trackers), without an
 * interpreter's overhead in the measurement.
 *   loop access PATH N | stat PATH N | openread PATH N | openread2 PATH_A PATH_B N
 *        | events PATH_A PATH_B N | spawn PROGRAM N
 * Prints nanoseconds per iteration of the whole system (CLOCK_MONOTONIC) and of this
 * process's own CPU time (CLOCK_PROCESS_CPUTIME_ID: its user and kernel work, not what a
 * woken reader does); guest instructions under -icount. `openread2` and `events` alternate
 * between two files, so that every access to a watched one opens a new burst; `spawn`
 * forks, execs PROGRAM and waits for it (its figures are whole-system only). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int open_read_close(const char *path)
{
	char buf[256];
	int fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
		return 1;
	close(fd);
	return 0;
}

static int spawn_wait(const char *program)
{
	char *const argv[] = { (char *)program, NULL };
	char *const envp[] = { NULL };
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		execve(program, argv, envp);
		_exit(127);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *mode = argv[1];
	long n = atol(argv[argc - 1]);
	struct stat st;
	double start = now_ns(CLOCK_MONOTONIC);
	double cpu_start = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "access")) {
			if (access(argv[2], R_OK) != 0)
				return 1;
		} else if (!strcmp(mode, "stat")) {
			if (stat(argv[2], &st) != 0)
				return 1;
		} else if (!strcmp(mode, "openread")) {
			if (open_read_close(argv[2]))
				return 1;
		} else if (!strcmp(mode, "openread2")) {
			if (open_read_close(argv[2 + (i & 1)]))
				return 1;
		} else if (!strcmp(mode, "events")) {
			int fd = open(argv[2 + (i & 1)], O_RDONLY);
			if (fd < 0)
				return 1;
			close(fd);
		} else if (!strcmp(mode, "spawn")) {
			if (spawn_wait(argv[2]))
				return 1;
		} else {
			return 2;
		}
	}
	double cpu = now_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
	printf("%.1f %.1f\n", (now_ns(CLOCK_MONOTONIC) - start) / n, cpu / n);
	return 0;
}
