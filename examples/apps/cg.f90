! CG-like solver of a 1D Laplacian in Fortran: each iteration does a nonblocking halo
! exchange with the left and right neighbours (MPI_IRECV, MPI_ISEND, MPI_WAITALL), a
! matrix-vector product and two MPI_ALLREDUCE dot products.  Usage: cg_f N ITERS
program cg_f
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, n, iters, it, i, left, right
  integer :: reqs(4), stats(MPI_STATUS_SIZE, 4)
  character(len=32) :: arg
  double precision, allocatable :: x(:), r(:), p(:), q(:)
  double precision :: rr, rr_local, pq, pq_local, alpha, beta, rr_new

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  n = 4096
  iters = 10
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  left = rank - 1
  right = rank + 1
  if (rank == 0) left = MPI_PROC_NULL
  if (rank == nprocs - 1) right = MPI_PROC_NULL
  ! p has one ghost cell on each side: p(0) and p(n+1).
  allocate (x(n), r(n), p(0:n + 1), q(n))
  x = 0d0
  r = 1d0
  p = 0d0
  p(1:n) = 1d0
  rr_local = dble(n)
  call MPI_ALLREDUCE(rr_local, rr, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  do it = 1, iters
    call MPI_IRECV(p(0), 1, MPI_DOUBLE_PRECISION, left, 0, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_IRECV(p(n + 1), 1, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_ISEND(p(1), 1, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, reqs(3), ierr)
    call MPI_ISEND(p(n), 1, MPI_DOUBLE_PRECISION, right, 0, MPI_COMM_WORLD, reqs(4), ierr)
    call MPI_WAITALL(4, reqs, stats, ierr)
    pq_local = 0d0
    do i = 1, n
      q(i) = 2d0 * p(i) - p(i - 1) - p(i + 1)
      pq_local = pq_local + p(i) * q(i)
    end do
    call MPI_ALLREDUCE(pq_local, pq, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    alpha = rr / pq
    x = x + alpha * p(1:n)
    r = r - alpha * q
    call MPI_ALLREDUCE(sum(r * r), rr_new, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, &
                       ierr)
    beta = rr_new / rr
    rr = rr_new
    p(1:n) = r + beta * p(1:n)
  end do
  if (rank == 0) print '(a, es12.6)', 'cg_f: residual ', rr
  deallocate (x, r, p, q)
  call MPI_FINALIZE(ierr)
end program cg_f
