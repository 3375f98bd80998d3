// The serving protocol (reference/kern-schema.md §2.3): reads the axes, fills, tables and
// forwards off a verified manifest's `fill` / `batch` / `once` declarations, or says every
// reason the manifest does not fit.
//
// Contract: pure, never touches a device, never fails a manifest (a misfit is reported,
// the manifest stays verified). It relies on verify() for resolved names and sane shapes
// and re-checks nothing the verifier proved. Late-v4 `blocks` is accepted as an i32 [n]
// (n >= 2) input, at most one.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "kernrt/manifest/protocol.hpp"

namespace kernrt::manifest {
namespace {

std::string tk(const std::string& s) { return "`" + shortened(s) + "`"; }

std::string shape_text(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    if (i == 8) {  // a hostile shape of many dims is named by its first ones
      s += "\xe2\x80\xa6 " + std::to_string(shape.size()) + " dims";
      break;
    }
    s += shape[i].kind == Expr::Kind::Var ? "\"" + shortened(shape[i].var) + "\""
                                          : std::to_string(shape[i].value);
  }
  return s + "]";
}

bool is_var(const Expr& e) { return e.kind == Expr::Kind::Var; }
bool is_const(const Expr& e) { return e.kind == Expr::Kind::Const; }

struct Checker {
  const Manifest& m;
  Errors errors;
  size_t max_errors = 100;
  uint64_t omitted = 0;

  void fail(const std::string& path, std::string message) {
    if (errors.size() >= max_errors) {
      ++omitted;
      return;
    }
    constexpr size_t kMaxMessage = 2048;  // names are shortened where quoted; the backstop
    Error e;
    e.kind = ErrorKind::Manifest;
    e.path = path.size() <= kMaxMessage ? path : shortened(path, kMaxMessage);
    e.message = message.size() <= kMaxMessage ? std::move(message) : shortened(message, kMaxMessage);
    errors.push_back(std::move(e));
  }
  std::string bpath(const std::string& name) const {
    return json_pointer_append("/buffers", shortened(name));
  }
  std::optional<uint64_t> var_max(const std::string& v) const {
    auto it = m.vars.find(v);
    if (it == m.vars.end()) return std::nullopt;
    return it->second.max;
  }
  const State* indexed_state(const Buffer& b) const {
    if (!b.domain || !b.domain->index_into) return nullptr;
    auto it = m.states.find(*b.domain->index_into);
    return it == m.states.end() ? nullptr : &it->second;
  }
  bool is_line_table(const Buffer& b) const {
    const State* st = indexed_state(b);
    return b.kind == BufferKind::input && st != nullptr && st->bytes_per_seq > 0;
  }

  // The var of the one buffer carrying `fill`, shaped [<var>].
  std::optional<AxisVar> axis_of(Fill fill) {
    std::vector<const std::string*> all;
    for (const auto& [name, b] : m.buffers) {
      if (b.fill == fill) all.push_back(&name);
    }
    const std::string f = tk(to_string(fill));
    if (all.empty()) {
      fail("/buffers", "no input has fill " + f);
      return std::nullopt;
    }
    if (all.size() > 1) {
      fail(bpath(*all[1]) + "/fill", "fill " + f + " is on " + std::to_string(all.size()) +
                                         " buffers, expected one");
      return std::nullopt;
    }
    const Buffer& b = m.buffers.at(*all[0]);
    if (b.shape.size() == 1 && is_var(b.shape[0])) {
      if (auto mx = var_max(b.shape[0].var)) return AxisVar{b.shape[0].var, *mx};
    }
    fail(bpath(*all[0]) + "/shape", tk(*all[0]) + " (fill " + f + ") is shaped " +
                                        shape_text(b.shape) + ", expected [<var>]");
    return std::nullopt;
  }
};

// Buffers a program writes (an `out` or `inout` buffer arg of some call).
std::set<std::string> written_by(const Manifest& m, const Program& p) {
  std::set<std::string> out;
  for (const Call& call : p.calls) {
    auto op = m.ops.find(call.op);
    for (size_t j = 0; j < call.args.size(); ++j) {
      const auto* b = std::get_if<BufArg>(&call.args[j]);
      if (b == nullptr) continue;
      const bool known = op != m.ops.end() && j < op->second.params.size() &&
                         op->second.params[j].is_pointer();
      if (!known || op->second.params[j].dir != Direction::in) out.insert(b->name);
    }
  }
  return out;
}

// Forwards: each batch program's shape and, by dataflow, what it hands back.
void check_forwards(Checker& c, const Manifest& m, Protocol& p) {
  const AxisVar& rows = p.rows;
  const AxisVar& groups = p.groups;
  // Looked up per written buffer and per shape, so the cost is linear in programs + calls.
  std::map<std::string, const FillInfo*> handed_back;  // `tokens` and `count` fills
  for (const FillInfo& f : p.fills) {
    if (f.role == Fill::tokens || f.role == Fill::count) handed_back.emplace(f.buffer, &f);
  }
  std::map<std::tuple<uint64_t, std::string, uint64_t, bool>, std::string> shapes;
  for (const auto& [pname, prog] : m.programs) {
    if (prog.once.value_or(false)) p.once.push_back(pname);
    if (!prog.batch) continue;
    const Batch& batch = *prog.batch;
    const std::string pp = json_pointer_append("/programs", shortened(pname));
    const std::string bp = pp + "/batch";
    const std::string who = "program " + tk(pname);
    const bool var_rows = is_var(batch.rows);
    const uint64_t r = var_rows ? 0 : batch.rows.value;
    if (!var_rows) {
      uint64_t total = 0;
      if (__builtin_mul_overflow(batch.groups, r, &total) || total > rows.max) {
        c.fail(bp, who + ": " + std::to_string(batch.groups) + " sequences of " +
                       std::to_string(r) + " rows exceed the " + std::to_string(rows.max) +
                       " rows " + tk(rows.name) + " allows");
      }
    } else {
      if (batch.rows.var != rows.name) {
        c.fail(bp + "/rows", who + ": batch.rows is var " + tk(batch.rows.var) +
                                 ", but the rows of a call go in " + tk(rows.name));
      }
      if (batch.groups != 1) {
        c.fail(bp + "/groups", who + ": rows set per call means one sequence, not " +
                                   std::to_string(batch.groups) + " groups");
      }
    }
    if (batch.groups > groups.max) {
      c.fail(bp + "/groups", who + ": " + std::to_string(batch.groups) + " groups exceed the " +
                                 std::to_string(groups.max) + " " + tk(groups.name) + " allows");
    }
    if (batch.span) {
      const std::string& sv = *batch.span;
      if (var_rows || r != 1) {
        c.fail(bp + "/span", who + ": a span rides a call of one row per sequence, not " +
                                 tk(var_rows ? batch.rows.var : std::to_string(r)));
      }
      if (sv == rows.name || sv == groups.name) {
        c.fail(bp + "/span", who + ": batch.span is " + tk(sv) +
                                 ", which sizes the call itself; a run needs its own var");
      }
      auto mx = c.var_max(sv);
      if (mx && *mx > rows.max) {
        c.fail(bp + "/span", who + ": a run of " + std::to_string(*mx) + " rows (" + tk(sv) +
                                 ") exceeds the " + std::to_string(rows.max) + " rows " +
                                 tk(rows.name) + " allows");
      } else if (mx && p.span && p.span->name != sv) {
        c.fail(bp + "/span", who + ": batch.span is " + tk(sv) + ", but " + tk(p.span->name) +
                                 " sizes a run in another program; one var sizes every run");
      } else if (mx && !p.span) {
        p.span = AxisVar{sv, *mx};
      }
    }
    const std::set<std::string> written = written_by(m, prog);
    std::vector<const FillInfo*> tokens, counts;
    for (const std::string& b : written) {
      auto f = handed_back.find(b);
      if (f == handed_back.end()) continue;
      (f->second->role == Fill::tokens ? tokens : counts).push_back(f->second);
    }
    Forward fw;
    fw.program = pname;
    fw.groups = batch.groups;
    fw.rows = var_rows ? batch.rows.var : std::string();
    fw.rows_const = r;
    fw.span = batch.span;
    if (tokens.size() > 1) {
      c.fail(pp, who + ": writes " + std::to_string(tokens.size()) +
                                " `tokens` outputs; a call hands back one");
    } else if (tokens.size() == 1) {
      const FillInfo& f = *tokens[0];
      fw.tokens = f.buffer;
      const bool ok = var_rows ? f.width == 1 : (f.width == 1 || f.width == r);
      if (!ok) {
        c.fail(pp, who + ": hands back " + tk(f.buffer) + " of " +
                                  std::to_string(f.width) +
                                  " per sequence, but a call has " +
                                  (var_rows ? std::string("a variable number of")
                                            : std::to_string(r)) +
                                  " rows per sequence");
      }
    }
    if (!counts.empty() && (tokens.size() != 1 || tokens[0]->width <= 1)) {
      c.fail(pp, who + ": writes " + tk(counts[0]->buffer) +
                                " (fill `count`) but no `tokens` output of several per "
                                "sequence to count");
    }
    auto [same, fresh] = shapes.emplace(
        std::make_tuple(fw.groups, fw.rows, r, fw.span.has_value()), pname);
    if (!fresh) {
      c.fail(bp, who + " and " + tk(same->second) +
                     " accept the same call shape; a shape names one program");
    }
    p.forwards.push_back(fw);
  }
  if (p.forwards.empty()) {
    c.fail("/programs", "no program declares a `batch`: nothing for a serving loop to drive");
  } else if (std::none_of(p.forwards.begin(), p.forwards.end(),
                          [](const Forward& f) { return f.tokens.has_value(); })) {
    c.fail("/programs",
           "no program with a `batch` writes a `tokens` output: no call hands a token back");
  }
  if (p.span && std::none_of(p.fills.begin(), p.fills.end(),
                             [](const FillInfo& f) { return f.role == Fill::span_at; })) {
    c.fail("/buffers",
           "a program takes a run of rows (batch.span) but no input has fill `span_at`");
  }
}

}  // namespace

Result<Protocol> check_protocol(const Verified& v, size_t max_errors) {
  const Manifest& m = v.manifest();
  Checker c{m, {}, max_errors, 0};
  auto rows = c.axis_of(Fill::slot);
  auto groups = c.axis_of(Fill::seq_len);
  if (rows && groups && rows->name == groups->name) {
    c.fail("/buffers", "`slot` and `seq_len` are both over var " + tk(rows->name) +
                           "; rows and sequences need their own");
  }
  auto failed = [&c] {
    auto r = Result<Protocol>::fail(std::move(c.errors));
    r.omitted = c.omitted;
    return r;
  };
  if (!rows || !groups) return failed();

  Protocol p;
  p.rows = *rows;
  p.groups = *groups;
  // A third var, over which something spans the tray batch.
  std::set<std::string> tray_vars;
  for (const auto& entry : m.buffers) {
    const Buffer& b = entry.second;
    const bool line = c.is_line_table(b);
    if (!b.fill && !line) continue;
    const size_t col = line ? 1 : 0;
    if (b.shape.size() > col && is_var(b.shape[col]) && b.shape[col].var != rows->name &&
        b.shape[col].var != groups->name) {
      tray_vars.insert(b.shape[col].var);
    }
  }
  if (tray_vars.size() > 1) {
    c.fail("/buffers", "fills and line tables span " + std::to_string(tray_vars.size()) +
                           " vars besides rows and sequences, at most one names the tray batch");
  }
  if (!tray_vars.empty()) {
    if (auto mx = c.var_max(*tray_vars.begin())) p.tray = AxisVar{*tray_vars.begin(), *mx};
  }
  const std::string tray_name = p.tray ? p.tray->name : std::string();

  // Fills.
  for (const auto& [name, b] : m.buffers) {
    if (!b.fill) continue;
    const Fill fill = *b.fill;
    FillInfo info{name, fill, b.dtype, "", 1};
    uint64_t fixed = 0;
    if (b.shape.size() == 1 && is_var(b.shape[0])) {
      info.axis = b.shape[0].var;
    } else if (b.shape.size() == 1 && is_const(b.shape[0])) {
      fixed = b.shape[0].value;
    } else if (b.shape.size() == 2 && is_var(b.shape[0]) && is_const(b.shape[1])) {
      info.axis = b.shape[0].var;
      info.width = b.shape[1].value;
    } else {
      c.fail(c.bpath(name) + "/shape", tk(name) + " (fill " + tk(to_string(fill)) +
                                           ") is shaped " + shape_text(b.shape) +
                                           ", expected [<axis>], [<n>] or [<axis>, w]");
      continue;
    }
    const bool on_rows = info.axis == rows->name;
    const bool on_groups = info.axis == groups->name;
    const bool on_tray = !info.axis.empty() && !on_rows && !on_groups;
    const bool one = info.width == 1;
    bool ok = false;
    const char* want = "";
    switch (fill) {
      case Fill::token:
        ok = one && !info.axis.empty();
        want = "expected [rows], [tray] (one per row) or [groups] (each sequence's first)";
        break;
      case Fill::position:
      case Fill::slot:
        ok = one && on_rows;
        want = "expected [rows]";
        break;
      case Fill::seq_len:
      case Fill::count:
        ok = one && on_groups;
        want = "expected [groups]";
        break;
      case Fill::cu_seqlens:
        ok = info.axis.empty() && fixed > groups->max;
        want = "expected [n] with n >= groups + 1";
        break;
      case Fill::tokens:
        ok = on_groups || (on_tray && one);
        want = "expected [groups], [groups, w] or [tray]";
        break;
      case Fill::span_at:
      case Fill::error:
        ok = info.axis.empty() && fixed == 1 && b.dtype == DType::i32;
        want = "expected i32 [1]";
        break;
      case Fill::blocks:
        ok = info.axis.empty() && fixed >= 2 && b.dtype == DType::i32;
        want = "expected i32 [n] with n >= 2";
        break;
    }
    if (!ok) {
      c.fail(c.bpath(name) + "/shape", tk(name) + " (fill " + tk(to_string(fill)) +
                                           ") is shaped " + shape_text(b.shape) + ": " + want);
      continue;
    }
    p.fills.push_back(info);
  }
  auto count_fills = [&](Fill f, const std::string* axis) {
    return std::count_if(p.fills.begin(), p.fills.end(), [&](const FillInfo& i) {
      return i.role == f && (axis == nullptr || i.axis == *axis);
    });
  };
  if (count_fills(Fill::token, &rows->name) > 1) {
    c.fail("/buffers", "fill `token` over the rows is on more than one buffer");
  }
  if (p.tray && count_fills(Fill::token, &tray_name) > 1) {
    c.fail("/buffers", "fill `token` over the tray is on more than one buffer");
  }
  if (count_fills(Fill::token, &rows->name) + (p.tray ? count_fills(Fill::token, &tray_name) : 0) ==
      0) {
    c.fail("/buffers",
           "no input has fill `token` over the rows: nothing carries the tokens a call feeds");
  }
  if (count_fills(Fill::token, &groups->name) > 1) {
    c.fail("/buffers", "fill `token` over the sequences is on more than one buffer");
  }
  for (Fill f : {Fill::position, Fill::cu_seqlens, Fill::span_at, Fill::count, Fill::error,
                 Fill::blocks}) {
    size_t n = 0;
    for (const auto& entry : m.buffers) n += entry.second.fill == f;
    if (n > 1) c.fail("/buffers", "fill " + tk(to_string(f)) + " is on more than one buffer");
  }

  // Tables: inputs without a role of their own that index a state.
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != BufferKind::input || b.fill) continue;
    const State* st = c.indexed_state(b);
    if (st == nullptr) continue;
    if (b.dtype != DType::i32) {
      c.fail(c.bpath(name) + "/dtype", "table " + tk(name) + " is " + to_string(b.dtype) +
                                           ", the runtime hands out i32 page and line indices");
      continue;
    }
    const auto& s = b.shape;
    if (st->bytes_per_seq > 0) {
      const bool shaped = (s.size() == 2 || (s.size() == 3 && is_const(s[2]))) &&
                          is_const(s[0]) && is_var(s[1]);
      if (!shaped) {
        c.fail(c.bpath(name) + "/shape",
               "line table " + tk(name) + " is shaped " + shape_text(s) +
                   ", expected [lines, <groups|tray>] or [lines, <groups|tray>, w]");
      } else if (s[1].var == rows->name) {
        c.fail(c.bpath(name) + "/shape", "line table " + tk(name) + " has a column per row (" +
                                             tk(s[1].var) + "); lines are per sequence");
      } else {
        p.line_tables.push_back(name);
      }
    } else if (s.size() == 2 && is_var(s[0]) && s[0].var == groups->name && is_const(s[1])) {
      p.page_tables.push_back(name);
    } else {
      c.fail(c.bpath(name) + "/shape", "page table " + tk(name) + " is shaped " +
                                           shape_text(s) + ", expected [<groups>, n]");
    }
  }
  check_forwards(c, m, p);
  if (!c.errors.empty() || c.omitted != 0) return failed();
  return Result<Protocol>::ok(std::move(p));
}

}  // namespace kernrt::manifest
