! The task farm of matched_probe.c through the Fortran bindings (`use mpi`): the master
! takes results with MPI_MPROBE(MPI_ANY_SOURCE) and MPI_MRECV and answers the sender
! (tag 1: a task, tag 2: stop); a worker takes tasks with MPI_MPROBE and MPI_MRECV while
! their tag is 1. Open MPI's Fortran layer calls PMPI_* directly, so only the tracer's
! Fortran wrappers see these calls.
! Usage: matched_probe_f TASKS
program matched_probe_f
  use mpi
  implicit none
  integer :: ierr, rank, size, tasks, sent, active, w, tag, msg
  integer :: st(MPI_STATUS_SIZE)
  integer(kind=8) :: n, i
  double precision :: r, total
  character(len=16) :: arg

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  tasks = 12
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) tasks
  end if
  if (rank == 0) then
    n = 200000
    sent = 0
    active = 0
    do w = 1, size - 1
      tag = 2
      if (sent < tasks) tag = 1
      call MPI_SEND(n, 1, MPI_INTEGER8, w, tag, MPI_COMM_WORLD, ierr)
      if (tag == 1) then
        sent = sent + 1
        active = active + 1
      end if
    end do
    total = 0
    do while (active > 0)
      call MPI_MPROBE(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, msg, st, ierr)
      call MPI_MRECV(r, 1, MPI_DOUBLE_PRECISION, msg, st, ierr)
      total = total + r
      active = active - 1
      tag = 2
      if (sent < tasks) tag = 1
      call MPI_SEND(n, 1, MPI_INTEGER8, st(MPI_SOURCE), tag, MPI_COMM_WORLD, ierr)
      if (tag == 1) then
        sent = sent + 1
        active = active + 1
      end if
    end do
    print '(a, f0.3)', 'matched_probe_f: ', total
  else
    do
      call MPI_MPROBE(0, MPI_ANY_TAG, MPI_COMM_WORLD, msg, st, ierr)
      call MPI_MRECV(n, 1, MPI_INTEGER8, msg, st, ierr)
      if (st(MPI_TAG) == 2) exit
      r = 0
      do i = 1, n
        r = r + 1.0d0 / dble(i)
      end do
      call MPI_SEND(r, 1, MPI_DOUBLE_PRECISION, 0, 3, MPI_COMM_WORLD, ierr)
    end do
  end if
  call MPI_FINALIZE(ierr)
end program matched_probe_f
