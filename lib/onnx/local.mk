# onnx: the ONNX importer (clrun_graph_load_onnx), over graph. The protobuf parser is C that
# protoc-c generates at build time from Debian's onnx.proto (ONNX_PROTO, found by configure):
# never committed, never distributed.
ONNX_SOURCES = \
	lib/onnx/import.c lib/onnx/import.h \
	lib/onnx/emit.c \
	lib/onnx/attrs.c \
	lib/onnx/wire.c lib/onnx/wire.h \
	lib/onnx/tensor.c lib/onnx/tensor.h \
	lib/onnx/tensor_file.c \
	lib/onnx/ops.c \
	lib/onnx/fold.c lib/onnx/fold.h \
	lib/onnx/fold_ops.c \
	lib/onnx/move.c \
	lib/onnx/map_elementwise.c \
	lib/onnx/map_layout.c \
	lib/onnx/map_nn.c \
	lib/onnx/map_reduce.c \
	lib/onnx/map_misc.c \
	lib/onnx/map.h
ONNX_GENERATED = lib/onnx/onnx.pb-c.c lib/onnx/onnx.pb-c.h

libclrun_internal_la_SOURCES += $(ONNX_SOURCES)
nodist_libclrun_internal_la_SOURCES += $(ONNX_GENERATED)
clruninclude_HEADERS += include/clrun/onnx.h
BUILT_SOURCES += $(ONNX_GENERATED)
CLEANFILES += $(ONNX_GENERATED)

# protoc-c writes both files; the header's rule only remakes them when it went missing alone.
lib/onnx/onnx.pb-c.c: $(ONNX_PROTO)
	$(AM_V_at)$(MKDIR_P) lib/onnx
	$(AM_V_GEN)$(PROTOC_C) --c_out=lib/onnx --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
lib/onnx/onnx.pb-c.h: lib/onnx/onnx.pb-c.c
	@test -f $@ || { rm -f lib/onnx/onnx.pb-c.c; $(MAKE) $(AM_MAKEFLAGS) lib/onnx/onnx.pb-c.c; }

EXTRA_DIST += docs/onnx.md
