// Pack plans and images (see pack.hpp).
#include "pack.hpp"

#include "lower.hpp"

#include <cstring>
#include <type_traits>
#include <variant>

namespace kernrt::rt {

void store_le(uint8_t* dst, uint64_t value, uint32_t width) {
  for (uint32_t i = 0; i < width && i < 8; ++i) dst[i] = static_cast<uint8_t>(value >> (8 * i));
}

bool PackPlan::write(const uint64_t* dense, uint8_t* image) const {
  std::memcpy(image, base.data(), size);
  for (const Dynamic& d : dynamic) {
    uint64_t v = 0;
    if (!d.value.eval(dense, &v)) return false;
    store_le(image + d.at, v, d.width);
  }
  return true;
}

void PackPlan::mark_reads(std::vector<bool>* reads) const {
  for (const Dynamic& d : dynamic) {
    if (d.value.dynamic) d.value.expr.mark_reads(reads);
  }
}

namespace {

struct FieldValue {
  Value value;
  uint32_t natural_width = 4;
};

}  // namespace

Result<PackPlan> build_pack_plan(const manifest::Pack& pack, const PackContext& ctx) {
  PackPlan plan;
  plan.size = pack.size;
  plan.base.assign(pack.size, 0);
  Errors errors;
  const std::string fields_path = json_pointer_append(ctx.path, "fields");

  for (size_t i = 0; i < pack.fields.size(); ++i) {
    const manifest::PackField& f = pack.fields[i];
    const std::string path = json_pointer_append(fields_path, i);
    auto fail = [&](const std::string& message) {
      errors.push_back(Error{ErrorKind::Manifest, path, message});
    };

    if (const auto* tm = std::get_if<manifest::TensorMap>(&f.source)) {
      const std::string tm_path = json_pointer_append(path, "tensormap");
      if (f.at % 64 != 0 || uint64_t{f.at} + 128 > pack.size) {
        fail("tensormap at " + std::to_string(f.at) + " must be 64-byte aligned and end "
             "within the " + std::to_string(pack.size) + "-byte pack");
        continue;
      }
      if (tm->param >= ctx.interface->size() || !(*ctx.interface)[tm->param].pointer) {
        fail("tensormap param " + std::to_string(tm->param) +
             " is not a buffer or state of the interface");
        continue;
      }
      const Slot& slot = (*ctx.interface)[tm->param];
      TensorMapSite site{tm_path, slot.what + " in call " + ctx.call};
      auto spec = tensormap_spec(*tm, slot.region.address, slot.region.bytes, site);
      if (!spec) {
        errors.insert(errors.end(), spec.errors.begin(), spec.errors.end());
        continue;
      }
      auto blob = ctx.encoder->encode(*spec.value, tm_path);
      if (!blob) {
        errors.insert(errors.end(), blob.errors.begin(), blob.errors.end());
        continue;
      }
      std::memcpy(plan.base.data() + f.at, blob.value->data(), blob.value->size());
      plan.maps.push_back(*spec.value);
      if (slot.buffer >= 0) plan.relocations.push_back({f.at, 128, slot.buffer, slot.offset, true});
      continue;
    }

    FieldValue fv;
    bool ok = true;
    const Slot* pointer_slot = nullptr;  // a buffer pointer field, for its relocation
    std::visit(
        [&](const auto& src) {
          using T = std::decay_t<decltype(src)>;
          if constexpr (std::is_same_v<T, manifest::ParamRef>) {
            if (src.index >= ctx.interface->size()) {
              fail("pack field names param " + std::to_string(src.index) + " but the op has " +
                   std::to_string(ctx.interface->size()) + " params");
              ok = false;
              return;
            }
            fv.value = (*ctx.interface)[src.index].value;
            fv.natural_width = (*ctx.interface_types)[src.index].size_bytes();
            if ((*ctx.interface)[src.index].buffer >= 0) pointer_slot = &(*ctx.interface)[src.index];
          } else if constexpr (std::is_same_v<T, manifest::ScratchRef>) {
            const Region* region = nullptr;
            if (ctx.scratch) {
              auto it = ctx.scratch->find(src.name);
              if (it != ctx.scratch->end()) region = &it->second;
            }
            if (region == nullptr) {
              fail("unknown scratch `" + src.name + "`");
              ok = false;
              return;
            }
            fv.value = Value::fixed(region->address);
            fv.natural_width = 8;
          } else if constexpr (std::is_same_v<T, manifest::LitI32>) {
            fv.value = Value::fixed(literal_bits(src));
            fv.natural_width = 4;
          } else if constexpr (std::is_same_v<T, manifest::LitI64>) {
            fv.value = Value::fixed(literal_bits(src));
            fv.natural_width = 8;
          } else if constexpr (std::is_same_v<T, manifest::LitF32>) {
            fv.value = Value::fixed(literal_bits(src));
            fv.natural_width = 4;
          } else if constexpr (std::is_same_v<T, manifest::LitU8>) {
            fv.value = Value::fixed(literal_bits(src));
            fv.natural_width = 1;
          } else if constexpr (std::is_same_v<T, manifest::VarRef> ||
                               std::is_same_v<T, manifest::Expr>) {
            manifest::Expr e;
            if constexpr (std::is_same_v<T, manifest::VarRef>) {
              e = manifest::Expr::variable(src.name);
            } else {
              e = src;
            }
            std::string why;
            auto c = CompiledExpr::compile(e, *ctx.vars, &why);
            if (!c) {
              fail(why);
              ok = false;
              return;
            }
            fv.value = Value::of(std::move(*c));
            fv.natural_width = 4;
          } else if constexpr (std::is_same_v<T, manifest::RankRef>) {
            // This process's index in the group (a bare pack context has none).
            const auto r = ctx.ranks ? ctx.ranks->find(src.group) : Ranks::const_iterator{};
            if (!ctx.ranks || r == ctx.ranks->end()) {
              fail("rank field `" + src.group + "`: this process has no index in the group (a "
                   "multi-rank group needs LoadOptions::ranks)");
              ok = false;
              return;
            }
            fv.value = Value::fixed(r->second);
            fv.natural_width = 4;  // kern-schema §1.12: a rank field is 4 bytes
          }
        },
        f.source);
    if (!ok) continue;

    const uint32_t width = f.width.value_or(fv.natural_width);
    if (width < 1 || width > 8 || uint64_t{f.at} + width > pack.size) {
      fail("field of width " + std::to_string(width) + " at " + std::to_string(f.at) +
           " must be 1-8 bytes wide and end within the " + std::to_string(pack.size) +
           "-byte pack");
      continue;
    }
    if (pointer_slot) {
      plan.relocations.push_back({f.at, width, pointer_slot->buffer, pointer_slot->offset, false});
    }
    if (fv.value.dynamic) {
      plan.dynamic.push_back(PackPlan::Dynamic{f.at, width, std::move(fv.value)});
    } else {
      store_le(plan.base.data() + f.at, fv.value.constant, width);
    }
  }
  if (!errors.empty()) return Result<PackPlan>::fail(std::move(errors));
  return Result<PackPlan>::ok(std::move(plan));
}

}  // namespace kernrt::rt
