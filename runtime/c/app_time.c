/* perfskel's application timer: times an MPI application between MPI_Init and
 * MPI_Finalize. `perfskel validate` links it into the applications it builds
 * (src/cmd_validate.rs); scripts/real-apps.sh builds it as a shared library and
 * preloads it into the ranks (`mpirun -x LD_PRELOAD=...`), so it also times programs
 * we do not build (LAMMPS, HPCC). Barriers at both ends make the span the slowest
 * rank's, like the application time a trace's manifest gives. Rank 0 prints one line:
 * perfskel-app-time seconds=S. */
#include <mpi.h>
#include <stdio.h>

static double perfskel_t0;

static void perfskel_start(void) {
    PMPI_Barrier(MPI_COMM_WORLD);
    perfskel_t0 = PMPI_Wtime();
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    perfskel_start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    perfskel_start();
    return rc;
}

int MPI_Finalize(void) {
    int rank;
    PMPI_Barrier(MPI_COMM_WORLD);
    double seconds = PMPI_Wtime() - perfskel_t0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("perfskel-app-time seconds=%.6f\n", seconds);
        fflush(stdout);
    }
    return PMPI_Finalize();
}
