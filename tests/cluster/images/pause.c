/* The pod sandbox's process for the local cluster's containerd (the role of
 * registry.k8s.io/pause, which no registry here can serve).  It holds the
 * pod's namespaces open, reaps any child it inherits as PID 1, and exits on
 * SIGINT or SIGTERM.  Built static so the image needs no libc. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig)
{
        (void)sig;
        _exit(0);
}

static void on_child(int sig)
{
        (void)sig;
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
}

int main(void)
{
        struct sigaction term = { .sa_handler = on_term };
        struct sigaction child = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART };

        if (sigaction(SIGINT, &term, NULL) < 0 || sigaction(SIGTERM, &term, NULL) < 0 ||
            sigaction(SIGCHLD, &child, NULL) < 0)
                return 1;
        for (;;)
                pause();
}
