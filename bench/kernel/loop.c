/* Tight syscall loops for the kernel benchmark (bench/kernel.ts): the cost of the calls
 * that run inode_permission, without an interpreter's overhead in the measurement.
 *   loop access PATH N | stat PATH N | openread PATH N | events PATH_A PATH_B N
 * Prints nanoseconds per iteration (CLOCK_MONOTONIC; guest instructions under -icount). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	const char *mode = argv[1];
	long n = atol(argv[argc - 1]);
	char buf[256];
	struct stat st;
	double start = now_ns();
	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "access")) {
			if (access(argv[2], R_OK) != 0)
				return 1;
		} else if (!strcmp(mode, "stat")) {
			if (stat(argv[2], &st) != 0)
				return 1;
		} else if (!strcmp(mode, "openread")) {
			int fd = open(argv[2], O_RDONLY);
			if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
				return 1;
			close(fd);
		} else if (!strcmp(mode, "events")) {
			int fd = open(argv[2 + (i & 1)], O_RDONLY);
			if (fd < 0)
				return 1;
			close(fd);
		} else {
			return 2;
		}
	}
	printf("%.1f\n", (now_ns() - start) / n);
	return 0;
}
