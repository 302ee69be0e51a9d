# What every test shares; each area's local.mk lists its own tests and benchmarks.
AM_TESTS_ENVIRONMENT = LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan.supp:print_suppressions=0" ; export LSAN_OPTIONS ;
EXTRA_DIST += tests/lsan.supp tests/device_test.h

if HAVE_CMOCKA
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
TEST_LDADD = libclrun-internal.la $(CMOCKA_LIBS)
endif
