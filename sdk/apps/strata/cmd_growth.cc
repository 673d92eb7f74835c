// `strata growth --db FILE --agent ID --svg OUT.svg [--csv OUT.csv]`: draws an agent's context
// growth (tokens per layer over turns, compactions marked) from a store.
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "growth_chart.h"
#include "strata/store.h"

namespace strata::cli {
namespace {

struct GrowthArgs {
  std::string db;
  std::string agent;
  std::string svg;
  std::string csv;
};

void WriteFile(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw CommandFailed{std::string("cannot write ") + what + " file \"" + path + "\""};
}

void Run(const GrowthArgs& args) {
  if (args.svg.empty() && args.csv.empty()) {
    throw CLI::ValidationError("growth", "give --svg OUT.svg and/or --csv OUT.csv");
  }
  StoreOptions options;
  options.create_if_missing = false;
  options.read_only = true;  // a chart never writes (nor turns an empty file into a store)
  StatusOr<std::unique_ptr<Store>> store = OpenStore(args.db, options);
  if (!store.ok()) throw CommandFailed{store.status().ToString()};
  StatusOr<StoredAgent> agent = (*store)->GetAgent(args.agent);
  if (!agent.ok()) throw CommandFailed{agent.status().ToString()};
  StatusOr<std::vector<GrowthPoint>> points = (*store)->Growth(args.agent);
  if (!points.ok()) throw CommandFailed{points.status().ToString()};
  StatusOr<std::vector<StoredEvent>> compactions = (*store)->Events(args.agent, "compaction");
  if (!compactions.ok()) throw CommandFailed{compactions.status().ToString()};

  GrowthChartInput input;
  input.agent_id = args.agent;
  input.points = std::move(*points);
  for (const StoredEvent& e : *compactions) input.compaction_turns.push_back(e.turn);
  input.tokens_estimated = agent->tokenizer_name.rfind("estimate", 0) == 0;
  if (!args.svg.empty()) WriteFile(args.svg, RenderGrowthSvg(input), "--svg");
  if (!args.csv.empty()) WriteFile(args.csv, RenderGrowthCsv(input.points), "--csv");
  std::cout << "agent " << args.agent << ": " << input.points.size() << " growth points, "
            << input.compaction_turns.size() << " compaction events";
  if (!args.svg.empty()) std::cout << "; chart " << args.svg;
  if (!args.csv.empty()) std::cout << "; numbers " << args.csv;
  std::cout << "\n";
}

}  // namespace

void RegisterGrowth(CLI::App& app) {
  auto args = std::make_shared<GrowthArgs>();
  CLI::App* cmd = app.add_subcommand(
      "growth",
      "Draw an agent's context growth (tokens per layer per turn, compactions) from a store");
  cmd->add_option("--db", args->db, "Store file (SQLite) written by strata")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--agent", args->agent, "Agent id (see `strata inspect --db FILE`)")->required();
  cmd->add_option("--svg", args->svg, "Write the chart as SVG to this file");
  cmd->add_option("--csv", args->csv, "Write the raw numbers as CSV to this file");
  cmd->callback([args] { Run(*args); });
}

}  // namespace strata::cli
