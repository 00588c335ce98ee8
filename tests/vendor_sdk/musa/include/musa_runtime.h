/* NOT Moore Threads' header: the mapping build's stand-in (see musa_runtime_api.h). */
#ifndef ACCEL_MAPPED_MUSA_RUNTIME_H_
#define ACCEL_MAPPED_MUSA_RUNTIME_H_
#include "musa_runtime_api.h"
#endif /* ACCEL_MAPPED_MUSA_RUNTIME_H_ */
