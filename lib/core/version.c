#include "config.h"

#include <clrun/clrun.h>

const char *clrun_version(void) { return PACKAGE_VERSION; }
