clruninclude_HEADERS += \
	include/clrun/clrun.h \
	include/clrun/status.h \
	include/clrun/log.h \
	include/clrun/context.h \
	include/clrun/program.h \
	include/clrun/memory.h \
	include/clrun/memory_stats.h \
	include/clrun/options.h \
	include/clrun/exec.h \
	include/clrun/pipeline.h \
	include/clrun/run_parallel.h \
	include/clrun/strategy.h
