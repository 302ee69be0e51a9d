# fuse: the rewrites an executor applies at creation: elementwise groups (group.c decides, pure
# C), their generated kernels (codegen.c, text only), and the rewrite that builds them and puts
# fused nodes in a draft of the graph (fuse.c, draft.c). Depends on graph, device and ops.
libclrun_internal_la_SOURCES += \
	lib/fuse/draft.c lib/fuse/draft.h \
	lib/fuse/group.c lib/fuse/group.h \
	lib/fuse/codegen.c lib/fuse/codegen.h \
	lib/fuse/fuse.c lib/fuse/fuse.h
