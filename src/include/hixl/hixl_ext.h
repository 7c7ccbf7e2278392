/**
 * @file hixl_ext.h
 * @brief Extensions of the built-in engine that vendor HIXL does not have.
 *
 * Kept out of hixl.h so that a build against the vendor header simply lacks
 * them: engine-allocated (shared, mappable) memory, 64-bit remote atomics,
 * per-peer flush, direct pointers to mapped peer memory, counters, the
 * detailed message of the last failure, and the capability query that says
 * which of them an engine has. The types are in hixl_ext_types.h; each call
 * is declared once, in hixl_ext_calls.h, with its documentation.
 */
#ifndef HIXL_HIXL_EXT_H
#define HIXL_HIXL_EXT_H

#include <cstdint>
#include <string>
#include <vector>

#include "hixl/hixl.h"
#include "hixl/hixl_ext_types.h"

namespace hixl {
namespace ext {

#define HIXL_EXT_CALL(ret, name, params, fallback) ret name params;
#include "hixl/hixl_ext_calls.h"
#undef HIXL_EXT_CALL

}  // namespace ext
}  // namespace hixl

#endif  // HIXL_HIXL_EXT_H
