# m4/tt_require.m4 - project macros that stop configure with the Debian package
# to install when a dependency is missing.

# TT_REQUIRE_PKG(VARIABLE-PREFIX, PKG-MODULE, FALLBACK-PKG-MODULE, DEBIAN-PACKAGE)
# Look the library up with pkg-config (trying a second module name, since
# distributions name MPI's .pc file differently), and fail naming the package.
AC_DEFUN([TT_REQUIRE_PKG], [
  PKG_CHECK_MODULES([$1], [$2], [],
    [PKG_CHECK_MODULES([$1], [$3], [],
      [AC_MSG_ERROR([$2 was not found by pkg-config: install the Debian package $4 (apt-get install $4)])])])
])

# TT_REQUIRE_HEADER(HEADER, EXTRA-CPPFLAGS, DEBIAN-PACKAGE)
AC_DEFUN([TT_REQUIRE_HEADER], [
  tt_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $2"
  AC_CHECK_HEADER([$1], [],
    [AC_MSG_ERROR([$1 was not found: install the Debian package $3 (apt-get install $3)])])
  CPPFLAGS=$tt_save_CPPFLAGS
])

# TT_REQUIRE_FUNC(FUNCTION, EXTRA-LIBS, DEBIAN-PACKAGE)
AC_DEFUN([TT_REQUIRE_FUNC], [
  tt_save_LIBS=$LIBS
  LIBS="$LIBS $2"
  AC_CHECK_FUNC([$1], [],
    [AC_MSG_ERROR([$1 was not found in the library: install the Debian package $3 (apt-get install $3)])])
  LIBS=$tt_save_LIBS
])

# TT_WARN_CFLAGS: warnings the project keeps clean, when the compiler has them.
AC_DEFUN([TT_WARN_CFLAGS], [
  TT_CFLAGS=""
  # -ffp-contract=off: no fused multiply-adds, so the element-wise kernels give
  # the same bits on every x86-64 (SSE2, AVX2, AVX-512 clones) and compiler mode.
  # -fno-math-errno: sqrtf and friends may then be vectorized (we never read
  # errno after math functions); their results are the same correctly rounded ones.
  for tt_flag in -Wall -Wextra -Wshadow -Wno-unused-parameter -std=gnu11 -ffp-contract=off -fno-math-errno; do
    tt_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS $tt_flag -Werror"
    AC_MSG_CHECKING([whether $CC accepts $tt_flag])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
      [AC_MSG_RESULT([yes]); TT_CFLAGS="$TT_CFLAGS $tt_flag"],
      [AC_MSG_RESULT([no])])
    CFLAGS=$tt_save_CFLAGS
  done
  AC_SUBST([TT_CFLAGS])
])
