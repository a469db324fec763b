/* Tracer cost per MPI call, for scripts/bench-tracer.sh: times CALLS calls of MPI_Send
 * to MPI_PROC_NULL (the MPI library returns at once, so the time is the call path and,
 * when traced, the tracer's timing and encoding) and prints ns per call. Comparing a run
 * under `perfskel record` with a plain run gives the tracer's cost per event.
 * Usage: callrate CALLS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long calls = argc > 1 ? atol(argv[1]) : 1000000;
    double x = 1.0;
    double t0 = MPI_Wtime();
    for (long i = 0; i < calls; i++) MPI_Send(&x, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    printf("%.2f\n", (t1 - t0) / (double)calls * 1e9);
    MPI_Finalize();
    return 0;
}
