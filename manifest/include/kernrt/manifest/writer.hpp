// The canonical writer: sorted names, defaulted fields left out, a stable round trip
// (parse -> write -> parse -> write gives the same text). Constants are written resolved.
#pragma once

#include <string>

#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest {

std::string write_manifest(const Manifest& m);
std::string write_fragment(const Fragment& f);
std::string write_call(const Call& c);

}  // namespace kernrt::manifest
