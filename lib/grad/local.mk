# Gradients: reverse-mode differentiation as a rewrite of a graph (pure C, no OpenCL), one file
# of rules per op family.
libclrun_internal_la_SOURCES += \
	lib/grad/grad.c lib/grad/grad.h \
	lib/grad/grad_emit.c \
	lib/grad/grad_elementwise.c \
	lib/grad/grad_matmul.c \
	lib/grad/grad_norm.c \
	lib/grad/grad_layout.c \
	lib/grad/grad_conv.c \
	lib/grad/grad_index.c \
	lib/grad/train_graph.c lib/grad/train_graph.h \
	lib/grad/train_bn.c lib/grad/train_bn.h
clruninclude_HEADERS += \
	include/clrun/grad.h \
	include/clrun/train_graph.h
