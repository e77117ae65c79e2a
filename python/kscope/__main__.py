"""python -m kscope run: a Python program, left as it is, run with kscope on.

    python -m kscope run [options] script.py [args...]
    python -m kscope run [options] -m package.module [args...]

    --cupti              the activity collector: every kernel attributed to its scope (default)
    --production         the production preset instead (sampled CUDA-graph tracing, metric sampling)
    --no-cupti           scopes only: host time, and GPU time from their events
    --cupti-options TEXT the collector's options (KSCOPE_CUPTI_OPTIONS text: "graphs=node,sync=0")
    --attach WHEN        when the collector attaches: `late` (default: after CUDA's driver has
                         started) or `driver` (inside the driver's start, kscope's library being
                         the CUDA injection library; the driver is started before the program runs)
    --report PATH        where the report goes at exit (default: standard output)
    --format FORMAT      text, json, html, csv or openmetrics (default: from PATH's suffix, else text)
    --diagnose           the diagnosis too: after a text report, else on standard error
    --trace PATH         the Chrome trace / Perfetto JSON at exit as well
    --modules            a scope per torch.nn.Module call (kscope.torch.instrument_all)
    --module-depth N     ... down to N levels below each top module (0: the top modules alone)

The program runs as `python script.py args` would run it: __name__ == "__main__", sys.argv
the script's and its arguments, sys.path[0] the script's folder (runpy). The report is
written when the interpreter exits (atexit: after the program's own exit handlers, and
after its threads end), whether the program returned, called sys.exit or raised; the exit
status is the program's. A program that ends with os._exit, or is killed, writes none.
"""

from __future__ import annotations

import argparse
import atexit
import os
import runpy
import sys
import warnings

FORMATS = ("text", "json", "html", "csv", "openmetrics")
_SUFFIX_FORMATS = {".json": "json", ".html": "html", ".htm": "html", ".csv": "csv", ".txt": "text",
                   ".prom": "openmetrics", ".om": "openmetrics"}
# run's options that take a value (what follows them is not the program).
_VALUED = {"--report", "-o", "--format", "--trace", "--module-depth", "--cupti-options", "--attach"}


def _usage_error(parser, message):
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return 2


def _run_parser():
    p = argparse.ArgumentParser(
        prog="python -m kscope run",
        description="Runs a Python program with kscope on and writes its report when the program exits.",
        usage="%(prog)s [options] (script.py | -m module) [args...]")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--cupti", dest="mode", action="store_const", const="cupti",
                      help="the activity collector: every kernel attributed to its scope (default)")
    mode.add_argument("--production", dest="mode", action="store_const", const="production",
                      help="the production preset (sampled CUDA-graph tracing, GPU metric sampling)")
    mode.add_argument("--no-cupti", dest="mode", action="store_const", const="scopes",
                      help="scopes only: host time, and GPU time from their CUDA events")
    p.add_argument("--cupti-options", metavar="TEXT", help='the collector\'s options ("graphs=node,sync=0")')
    p.add_argument("--attach", choices=("late", "driver"), default="late",
                   help="late: the collector starts now (default); driver: inside the driver's start, "
                        "as a CUDA injection library (CUPTI attached there costs a launch less)")
    p.add_argument("--report", "-o", metavar="PATH", help="the report's file (default: standard output)")
    p.add_argument("--format", choices=FORMATS, help="the report's format (default: from the file's suffix, else text)")
    p.add_argument("--diagnose", action="store_true",
                   help="the diagnosis too: after a text report, else on standard error")
    p.add_argument("--trace", metavar="PATH", help="also the Chrome trace / Perfetto JSON")
    p.add_argument("--modules", action="store_true",
                   help="a scope per torch.nn.Module call (global forward hooks: every module call pays them)")
    p.add_argument("--module-depth", type=int, metavar="N",
                   help="with --modules: N levels below each top module (0: the top modules alone)")
    p.set_defaults(mode="cupti")
    return p


def _split(argv):
    """(kscope's options, "script" or "module", the target, the program's arguments); the
    target is None when none is given. The first word that is not one of run's options
    (or the word after `--`, or after -m) starts the program's part."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            rest = argv[i + 1:]
            return argv[:i], "script", (rest[0] if rest else None), rest[1:]
        if word == "-m":
            rest = argv[i + 1:]
            return argv[:i], "module", (rest[0] if rest else None), rest[1:]
        if word.startswith("-m") and len(word) > 2 and not word.startswith("--"):  # -mpackage.module
            return argv[:i], "module", word[2:], argv[i + 1:]
        if word in _VALUED:
            i += 2
            continue
        if word.startswith("-"):
            i += 1
            continue
        return argv[:i], "script", word, argv[i + 1:]
    return argv, "script", None, []


def _format_of(options) -> str:
    if options.format:
        return options.format
    if options.report:
        return _SUFFIX_FORMATS.get(os.path.splitext(options.report)[1].lower(), "text")
    return "text"


def _attach_at_driver_start(kscope, options) -> bool:
    """--attach driver: kscope's library as the CUDA injection library, so that the driver
    starts the collector inside cuInit (src/kscope_c.cpp, InitializeInjection). False, said on
    standard error, where another injection library is set. (Where the driver had started in
    this process already, it calls no injection: the collector then starts late, and its status
    line does not say "attached at the driver's start".)"""
    if options.mode not in ("cupti", "production"):
        return False
    theirs = os.environ.get("CUDA_INJECTION64_PATH", "")
    if theirs and os.path.realpath(theirs) != os.path.realpath(kscope.library_path or ""):
        print(f"kscope run: --attach driver: CUDA_INJECTION64_PATH already names {theirs}; "
              "the collector attaches late instead", file=sys.stderr)
        return False
    if not kscope.library_path:
        return False
    os.environ["CUDA_INJECTION64_PATH"] = kscope.library_path
    os.environ["KSCOPE_INJECTION"] = options.mode
    if options.cupti_options:  # the environment's own options keep the last word, as they do late
        env = os.environ.get("KSCOPE_CUPTI_OPTIONS", "")
        os.environ["KSCOPE_CUPTI_OPTIONS"] = options.cupti_options + ("," + env if env else "")
    return True


def _start_cuda_driver() -> None:
    """cuInit now, with no kscope lock held: the driver calls kscope's InitializeInjection
    inside it. (kscope's own start would call it from inside its start, under its lock.)
    Without a driver nothing happens here; the enable that follows says why."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1").cuInit(0)
    except (OSError, AttributeError):
        pass


def _restore_environment(saved) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _start(kscope, options) -> None:
    """kscope on as asked; a collector that cannot run (no GPU, another tool owns CUPTI)
    leaves one line on standard error and the scopes working."""
    # The variables set here for the start are put back as they were before the program runs:
    # the program and its child processes see the environment the user gave.
    saved = {name: os.environ.get(name) for name in ("KSCOPE_CUPTI_OPTIONS", "CUDA_INJECTION64_PATH",
                                                     "KSCOPE_INJECTION")}
    at_driver_start = options.attach == "driver" and _attach_at_driver_start(kscope, options)
    if options.mode == "production" and options.cupti_options and not at_driver_start:
        # The preset takes no options argument; its collector reads KSCOPE_CUPTI_OPTIONS at its
        # start, as it does at the driver's start (the environment's own keep the last word).
        env = saved["KSCOPE_CUPTI_OPTIONS"]
        os.environ["KSCOPE_CUPTI_OPTIONS"] = options.cupti_options + ("," + env if env else "")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", kscope.KscopeWarning)
        try:
            if at_driver_start:
                _start_cuda_driver()  # the collector starts inside it; the enable below finds it running
            if options.mode == "production":
                kscope.enable_production()
            elif options.mode == "cupti":
                kscope.enable_cupti(options.cupti_options)
        finally:
            _restore_environment(saved)
    for w in caught:
        print(f"kscope run: {w.message}", file=sys.stderr)
    if options.modules:
        import kscope.torch as kscope_torch
        try:
            kscope_torch.instrument_all(max_depth=options.module_depth)
        except ImportError:
            print("kscope run: --modules needs PyTorch, which cannot be imported; no module scopes",
                  file=sys.stderr)


def _write_report(kscope, options, fmt) -> None:
    """The report, at the interpreter's exit."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        report = kscope.report()
        diagnosis = kscope.diagnose(report).text if options.diagnose else None
        if fmt == "text":
            text = report.text() + (("\n" + diagnosis) if diagnosis else "")
        else:
            text = {"json": report.json, "html": report.html, "csv": report.csv,
                    "openmetrics": report.openmetrics}[fmt]()
            if diagnosis:
                print(diagnosis, file=sys.stderr)
        if options.report:
            with open(options.report, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"kscope: wrote {options.report}", file=sys.stderr)
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        if options.trace:
            kscope.write_trace(options.trace)
            print(f"kscope: wrote {options.trace}", file=sys.stderr)
    except Exception as e:  # the program's exit status stays its own
        print(f"kscope run: no report: {type(e).__name__}: {e}", file=sys.stderr)


def run(argv) -> int:
    parser = _run_parser()
    ours, kind, target, program_args = _split(list(argv))
    options = parser.parse_args(ours)
    if target is None:
        return _usage_error(parser, "a script (or -m module) to run is needed")
    if options.module_depth is not None and options.module_depth < 0:
        return _usage_error(parser, "--module-depth must be 0 or more")
    if options.module_depth is not None and not options.modules:
        options.modules = True
    if kind == "script" and not os.path.exists(target):
        return _usage_error(parser, f"no such script: {target}")
    fmt = _format_of(options)
    # Paths as given from where kscope started: the program may change directory.
    for name in ("report", "trace"):
        value = getattr(options, name)
        if value:
            setattr(options, name, os.path.abspath(value))

    import kscope
    _start(kscope, options)
    atexit.register(_write_report, kscope, options, fmt)  # registered first: runs after the program's handlers

    if kind == "module":
        sys.argv = [target] + program_args  # run_module puts the module's file in sys.argv[0]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target] + program_args
        sys.path[0] = os.path.dirname(os.path.abspath(target))  # as `python script.py` sets it
        runpy.run_path(target, run_name="__main__")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    commands = {"run": run}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        asked = bool(argv) and argv[0] in ("-h", "--help")
        if argv and not asked:
            print(f"python -m kscope: unknown command {argv[0]!r}", file=sys.stderr)
        print(__doc__.strip(), file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
