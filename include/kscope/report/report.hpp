// kscope/report/report.hpp — what a session reports, as data (data.hpp) and its printers,
// one file per format: text.hpp (a terminal), json.hpp (the versioned JSON the kscope tool
// reads back), csv.hpp (one row per scope), html.hpp (one page with the roofline picture),
// openmetrics.hpp (live metrics for Prometheus: kscope::openmetrics(report)).
// The helpers they share are in detail/printing.hpp.
//
//   auto r = kscope::session::global().report();
//   std::fputs(r.text().c_str(), stdout);
//   r.write_json("run.json");
#pragma once

#include "data.hpp"
#include "csv.hpp"
#include "html.hpp"
#include "json.hpp"
#include "openmetrics.hpp"
#include "text.hpp"
