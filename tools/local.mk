bin_PROGRAMS += clrun
clrun_SOURCES = tools/clrun.c tools/cli.h tools/cmd_info.c tools/cmd_smoke.c tools/cmd_run.c
clrun_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
clrun_LDADD = libclrun-internal.la $(JSONC_LIBS)
