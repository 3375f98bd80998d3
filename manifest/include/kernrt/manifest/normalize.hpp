// normalize (§1.7): hoist inline `{"cubin": ..., "sha256": ...}` module declarations of
// launches into the top-level `modules` table (name = file stem, `-<sha8>` on a collision),
// then write canonically. Input is manifest or fragment text; output is canonical text.
#pragma once

#include <string>
#include <string_view>

#include "kernrt/manifest/error.hpp"

namespace kernrt::manifest {

Result<std::string> normalize(std::string_view text);

}  // namespace kernrt::manifest
