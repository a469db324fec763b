"""A task farm in mpi4py (Debian's python3-mpi4py): rank 0 hands out TASKS tasks (tag
1), each to whichever worker answered first (results: tag 3, received from any source),
then a stop (tag 2) to each worker; a worker takes tasks while they come. mpi4py's
pickled `comm.recv` is MPI_Mprobe then MPI_Mrecv.
Usage: task_farm.py TASKS WORK"""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 12
work = int(sys.argv[2]) if len(sys.argv) > 2 else 20000


def task(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


if rank == 0:
    sent = active = 0
    for w in range(1, size):
        if sent < tasks:
            comm.send(work, dest=w, tag=1)
            sent += 1
            active += 1
        else:
            comm.send(None, dest=w, tag=2)
    status = MPI.Status()
    results = 0
    while active:
        results += comm.recv(source=MPI.ANY_SOURCE, tag=3, status=status)
        active -= 1
        if sent < tasks:
            comm.send(work, dest=status.Get_source(), tag=1)
            sent += 1
            active += 1
        else:
            comm.send(None, dest=status.Get_source(), tag=2)
    print(f"task_farm: {tasks} tasks, {results}")
else:
    status = MPI.Status()
    while True:
        n = comm.recv(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == 2:
            break
        comm.send(task(n), dest=0, tag=3)
