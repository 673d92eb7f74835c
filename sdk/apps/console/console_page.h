// console_page.h — the HTML of strata's console, one page for strata-sidecar's /ui and for
// `strata inspect --html` (docs/sidecar.md "Console").
//
// The page is console.html with console.js and Chart.js (npm package chart.js, pinned in
// package.json) inlined at build time: it loads nothing from any other host, and its
// Content-Security-Policy forbids it to. In the sidecar it reads the JSON routes of
// console_routes.h from the server that served it; from a file it reads the agent page embedded
// in it (console_data.h AgentPage), so it opens offline.
//
//   std::string html = console::ConsolePage(console::FileBoot(page_json));
//
// Thread safety: the functions are thread-safe.
#ifndef STRATA_APPS_CONSOLE_CONSOLE_PAGE_H_
#define STRATA_APPS_CONSOLE_CONSOLE_PAGE_H_

#include <nlohmann/json.hpp>
#include <string>

namespace strata::console {

// What the page starts from: {"mode":"sidecar"} (data from /ui/api), or
// {"mode":"file","page":<AgentPage>} (the data embedded).
nlohmann::json SidecarBoot();
nlohmann::json FileBoot(nlohmann::json agent_page);

// The whole HTML document for `boot`: the template with its script, Chart.js and `boot` inlined
// (`boot` as JSON in a <script type="application/json">, with '<' escaped so no value can close
// the element).
std::string ConsolePage(const nlohmann::json& boot);

// Whether Chart.js was found at build time (without it the growth and pools charts are tables).
bool HasChartJs();

}  // namespace strata::console

#endif  // STRATA_APPS_CONSOLE_CONSOLE_PAGE_H_
