/**
 * @file abi_guard.h
 * @brief Decides whether the NIXL in this process has the ABI nixl_abi.h declares.
 *
 * api_version alone does not say it: NIXL 0.7.1 reports 1 with another
 * vtable. Two checks, both before any engine is made:
 *  - the NIXL version (read from the wheel metadata beside the libnixl.so
 *    loaded in the process) is one of nixl_abi.h's kCheckedNixlLayouts;
 *  - the UCX plugin that NIXL ships with itself has a backend vtable of our
 *    shape: nixlBackendEngine's vtable of 27 slots, and nixlUcxEngine's
 *    first 27 slots naming our methods in our order (read from its ELF
 *    symbol and relocation tables, nothing executed).
 */
#ifndef HIXL_NIXL_ABI_GUARD_H
#define HIXL_NIXL_ABI_GUARD_H

#include <string>
#include <vector>

namespace hixl_nixl {

/** Where the process's libnixl.so was loaded from ("" if none). */
std::string LoadedLibnixl();

/**
 * The NIXL version of the wheel holding `libnixl_path` (the version in its
 * `<dist>-<version>.dist-info` beside the libraries' folder), or "" with
 * `why` set.
 */
std::string NixlVersionOf(const std::string &libnixl_path, std::string &why);

/**
 * Checks `plugin_path` (an ELF libplugin_UCX.so) against our vtable shape;
 * "" when it matches, else what differs.
 */
std::string CheckVtableShape(const std::string &plugin_path);

/**
 * The whole guard: "" when the plugin may load, else the reason (naming the
 * version and the file checked).
 */
std::string CheckNixlAbi();

}  // namespace hixl_nixl

#endif  // HIXL_NIXL_ABI_GUARD_H
