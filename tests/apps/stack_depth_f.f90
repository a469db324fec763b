! stack_depth.c in Fortran: one subroutine communicates for two callers; at stack depth
! 2 its calls are two call sites (perfskel record --stack-depth), through the tracer's
! Fortran wrappers. Each subroutine works after its call so that no call is a tail call;
! gfortran has no noinline attribute, so the test builds it with the flag below.
! test-build-flags: -fno-inline
subroutine exchange(peer, buf, n)
  use mpi
  implicit none
  integer, intent(in) :: peer, n
  double precision, intent(inout) :: buf(64)
  integer :: ierr
  call MPI_SENDRECV_REPLACE(buf, n, MPI_DOUBLE_PRECISION, peer, 0, peer, 0, & ! SITE exchange
                            MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  buf(2) = buf(2) + 1d0
end subroutine exchange

subroutine forward(peer, buf)
  implicit none
  integer, intent(in) :: peer
  double precision, intent(inout) :: buf(64)
  call exchange(peer, buf, 16) ! SITE forward
  buf(3) = buf(3) + 1d0
end subroutine forward

subroutine reverse(peer, buf)
  implicit none
  integer, intent(in) :: peer
  double precision, intent(inout) :: buf(64)
  call exchange(peer, buf, 64) ! SITE reverse
  buf(4) = buf(4) + 1d0
end subroutine reverse

program stack_depth_f
  use mpi
  implicit none
  integer :: ierr, rank, nranks, peer, i
  double precision :: buf(64)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  buf = 0d0
  peer = ieor(rank, 1)
  if (peer >= nranks) peer = MPI_PROC_NULL
  do i = 1, 3
    call forward(peer, buf) ! SITE main-forward
  end do
  do i = 1, 5
    call reverse(peer, buf) ! SITE main-reverse
  end do
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(f6.1)', buf(2) + buf(3) + buf(4)
  call MPI_FINALIZE(ierr)
end program stack_depth_f
