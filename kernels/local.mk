# OpenCL C sources; every file here is embedded into the library (kernels/embed.sh).
CLRUN_KERNEL_FILES = \
	kernels/smoke.cl

EXTRA_DIST += kernels/embed.sh $(CLRUN_KERNEL_FILES)
nodist_libclrun_internal_la_SOURCES = lib/device/kernels_embedded.c
BUILT_SOURCES += lib/device/kernels_embedded.c
CLEANFILES += lib/device/kernels_embedded.c

lib/device/kernels_embedded.c: $(CLRUN_KERNEL_FILES) $(top_srcdir)/kernels/embed.sh
	$(AM_V_GEN)$(MKDIR_P) lib/device && $(SHELL) $(top_srcdir)/kernels/embed.sh $@ $(filter %.cl,$^)
