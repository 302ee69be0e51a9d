# core: status codes, failure helpers, log, options (the CLRUN_* table), version, the lifetime
# CSV format (read by the planner and by trace replay), small utilities. Depends on nothing else
# of clrun but the strategies' registry, which names the allocators CLRUN_ALLOCATOR accepts.
libclrun_internal_la_SOURCES += \
	lib/core/status.c \
	lib/core/error.c lib/core/error.h \
	lib/core/util.c lib/core/util.h \
	lib/core/share.c lib/core/share.h \
	lib/core/checked.h \
	lib/core/file.c lib/core/file.h \
	lib/core/strbuf.c lib/core/strbuf.h \
	lib/core/log.c lib/core/log.h \
	lib/core/options.c lib/core/options.h \
	lib/core/lifetimes.c \
	lib/core/version.c
clruninclude_HEADERS += include/clrun/lifetimes.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_options
TESTS += tests/test_options
tests_test_options_SOURCES = tests/test_options.c
tests_test_options_CFLAGS = $(TEST_CFLAGS)
tests_test_options_LDADD = $(TEST_LDADD)
endif
