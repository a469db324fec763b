! Ring pipeline in Fortran: rank 0 produces a block each iteration, every rank receives it
! from its left neighbour, transforms it and sends it on; the last rank consumes it.
! A final MPI_ALLREDUCE sums the checksum.  Usage: ring_f N ITERS
program ring_f
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, n, iters, it, i, k
  character(len=32) :: arg
  double precision, allocatable :: block(:)
  double precision :: checksum, total

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  n = 1024
  iters = 10
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  allocate (block(n))
  checksum = 0d0
  do it = 1, iters
    if (rank == 0) then
      do i = 1, n
        block(i) = dble(i + it)
      end do
    else
      call MPI_RECV(block, n, MPI_DOUBLE_PRECISION, rank - 1, it, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
    end if
    do k = 1, 8
      do i = 1, n
        block(i) = block(i) * 0.5d0 + 1d0 / (1d0 + block(i))
      end do
    end do
    if (rank < nprocs - 1) then
      call MPI_SEND(block, n, MPI_DOUBLE_PRECISION, rank + 1, it, MPI_COMM_WORLD, ierr)
    else
      checksum = checksum + sum(block)
    end if
  end do
  call MPI_ALLREDUCE(checksum, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, f0.6)', 'ring_f: checksum ', total
  deallocate (block)
  call MPI_FINALIZE(ierr)
end program ring_f
