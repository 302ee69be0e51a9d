libclrun_internal_la_SOURCES += \
	lib/status.c \
	lib/log.c lib/log.h \
	lib/options.c lib/options.h \
	lib/error.c \
	lib/cl.c lib/cl.h \
	lib/device.c lib/device.h \
	lib/context.c lib/context.h \
	lib/cache.c lib/cache.h \
	lib/program.c lib/program.h \
	lib/allocator.c lib/allocator.h \
	lib/pool.c lib/pool.h \
	lib/buffer_io.c \
	lib/schedule.c lib/schedule.h \
	lib/exec.c \
	lib/version.c
