/*
 * The sandbox ("pause") container of a pod on the test node: it holds the pod's namespaces and
 * waits. It reaps orphans (it is PID 1 of a shared PID namespace) and exits on SIGINT/SIGTERM.
 * No registry is reachable here, so the image is built from this file (test/cluster/images.ts).
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction q = {.sa_handler = quit};
  struct sigaction r = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &q, NULL);
  sigaction(SIGTERM, &q, NULL);
  sigaction(SIGCHLD, &r, NULL);
  for (;;) pause();
}
