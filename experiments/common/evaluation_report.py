"""The suite benchmark's outputs (``python -m experiments.evaluate``): report.md, report.json and report.png.

A report is a plain dict (what report.json holds):

    {"provenance": <results_json.provenance(): command, commit, dirty, date, machine>,
     "split": str, "tasks": int, "samples": int, "train_iterations": int, "seconds": float,
     "envs": {name: {"env_id": str, "model": str, "seconds": float,
                     "settings": <the run's RunSettings as a dict: env_config, warm start, overrides>,
                     "dtypes": <results_json.dtype_record(): the learner's and engine's dtypes, and why>,
                     "metrics": <algo.evaluate_policy()'s flat dict>,
                     "curve": [{"iteration": int, "success": float, "success_ci95_low": float,
                                "success_ci95_high": float}, ...],          # with --train: validation
                     "training": [{"iteration": int, "rollout_success": float}, ...]}}}  # with --train

A served model's report (``--endpoint``) adds ``"endpoint": {"url", "api_base", "served_model", "api_key_env"
(the variable's name, never the key), "timeout_s", "retries", "concurrency"}`` and per env ``"sampling"``
(temperature, top_p, max_tokens, stop, seed), ``"max_context_tokens"``, ``"lost": {"episodes",
"tasks_left_out", "kinds": {error kind: episodes}, "examples"}``, ``"turns_without_usage"`` and
``"ended_by"`` (episodes per end: ``env``, ``context``, ``budget``); its
``"dtypes"`` is absent and ``"metrics"`` is None when every task was lost.

Everything here is a pure function of that dict, so the tables and the figure are tested on synthetic metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.common.results_json import cpu_name, write_json

# The per-env table: (metric key of algo.evaluate_policy(), row label, format). pass@k rows come after.
ROWS = (
    ("return_mean", "mean return", "{:.3f}"),
    ("format_valid_rate", "format-valid turns", "{:.1%}"),
    ("turns_mean", "turns per episode", "{:.2f}"),
    ("response_length_mean", "response tokens per episode", "{:.1f}"),
    ("num_tasks", "tasks", "{:d}"),
    ("num_episodes", "episodes", "{:d}"),
)


def pass_keys(metrics: dict[str, Any]) -> list[str]:
    """The pass@k keys of a metrics dict, by increasing k."""
    return sorted((key for key in metrics if key.startswith("pass@")), key=lambda key: int(key[5:]))


def success_cell(metrics: dict[str, Any]) -> str:
    """Success with its 95% interval, e.g. ``0.469 [0.383, 0.557]``."""
    return f"{metrics['success']:.3f} [{metrics['success_ci95_low']:.3f}, {metrics['success_ci95_high']:.3f}]"


def interval_method(metrics: dict[str, Any]) -> str:
    """How the interval was computed and over which unit: Wilson over episodes with one sample a task, the
    t interval over task means with several (``success_ci95_method``; older records: Wilson, unclustered)."""
    method = metrics.get("success_ci95_method")
    if method is None:
        return "Wilson over episodes, unclustered"
    return "Wilson over episodes" if method == "wilson" else f"{method}, over tasks"


def env_table(metrics: dict[str, Any]) -> list[str]:
    """Markdown lines of one env's table: success with CI, pass@k, return, format rate, turns, length."""
    label = f"success (95% CI: {interval_method(metrics)})"
    lines = ["| metric | value |", "|---|---|", f"| {label} | {success_cell(metrics)} |"]
    lines += [f"| {key} | {metrics[key]:.3f} |" for key in pass_keys(metrics)]
    for key, label, form in ROWS:
        if key in metrics:
            value = int(metrics[key]) if form == "{:d}" else metrics[key]
            lines.append(f"| {label} | {form.format(value)} |")
    return lines


def machine_line(machine: dict[str, Any]) -> str:
    """One line of a provenance's machine, e.g. ``2 cores (AMD EPYC; avx2, fma), glibc malloc, no GPU``."""
    flags = ", ".join(machine["cpu_flags"]) or "no flags recorded"
    gpu = f"GPU {machine['gpu']}" if machine["gpu"] else "no GPU"
    return f"{machine['cores']} cores ({cpu_name(machine)}; {flags}), {machine['allocator']}, {gpu}"


def endpoint_lines(report: dict[str, Any]) -> list[str]:
    """The header lines of a served model's report: the server, the sampling and the lost episodes."""
    served = report["endpoint"]
    key = f"an API key from ${served['api_key_env']}" if served["api_key_env"] else "no API key"
    lines = [
        f"- served model: `{served['served_model']}` at {served['url']} (OpenAI-compatible chat completions, "
        f"{key}; timeout {served['timeout_s']:g} s, {served['retries']} retries, {served['concurrency']} "
        "episodes at once)",
    ]
    for name, entry in report["envs"].items():
        sampling, lost = entry["sampling"], entry["lost"]
        kinds = ", ".join(f"{kind}: {n}" for kind, n in lost["kinds"].items())
        lines.append(
            f"- {name}: temperature {sampling['temperature']:g}, top-p {sampling['top_p']:g}, at most "
            f"{sampling['max_tokens']} tokens a turn, seed {sampling['seed']}; lost episodes "
            f"{lost['episodes']}" + (f" ({kinds}; {lost['tasks_left_out']} tasks left out)" if kinds else "")
        )
    lines.append(
        "- a lost episode is one the server failed (connection, timeout, HTTP 429/5xx) after every retry: "
        "not a failure of the model; a task with a lost sample is left out of every figure"
    )
    return lines


def markdown(report: dict[str, Any]) -> str:
    """report.md: what was run (command, models, date, commit), a row per env, then a table per env."""
    envs = report["envs"]
    k = report["samples"]
    made = report["provenance"]
    dirty = " (with uncommitted changes)" if made["dirty"] else ""
    served = "endpoint" in report
    how = (
        "played over the endpoint, summarized as algo.evaluate_policy summarizes"
        if served
        else "algo.evaluate_policy: the algorithm's own evaluation"
    )
    lines = [
        "# freshrl benchmark: the agentic env suite",
        "",
        f"- command: `{made['command']}`",
        f"- date: {made['date']}; commit {made['commit']}{dirty}; {report['seconds']:.0f} s in all on "
        f"{machine_line(made['machine'])}",
        *(endpoint_lines(report) if served else []),
        f"- evaluation: {report['tasks']} {report['split']} tasks per env x {k} samples each ({how})",
        f"- training before the evaluation: {report['train_iterations']} DAPO iterations per env"
        if report["train_iterations"]
        else "- no training: the models as given",
        "- success: mean over all episodes, with its 95% interval: Wilson's over episodes with one sample a "
        "task, the t interval over the task means with several (a task's samples are one unit); pass@k: "
        "unbiased estimator (Chen et al. 2021), mean over tasks",
        "",
        "![success per env](report.png)",
        "",
        f"| env | model | success (95% CI) | pass@{k} | return | format-valid | turns | response tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in envs.items():
        m, model = entry["metrics"], entry["model"] if served else Path(entry["model"]).name
        if m is None:
            lines.append(f"| {name} | `{model}` | every task lost | | | | | |")
            continue
        lines.append(
            f"| {name} | `{model}` | {success_cell(m)} | {m.get(f'pass@{k}', m['success']):.3f} "
            f"| {m['return_mean']:.3f} | {m['format_valid_rate']:.1%} | {m['turns_mean']:.2f} "
            f"| {m['response_length_mean']:.1f} |"
        )
    for name, entry in envs.items():
        lines += [
            "",
            f"## {name} (`{entry['env_id']}`)",
            "",
            f"Model: `{entry['model']}`; {entry['seconds']:.0f} s.",
            "",
        ]
        if entry["metrics"] is None:
            lines.append(f"Every task lost ({entry['lost']['episodes']} episodes): no figures.")
            continue
        lines += env_table(entry["metrics"])
        if entry.get("curve"):
            points = ", ".join(f"{p['iteration']}: {p['success']:.3f}" for p in entry["curve"])
            lines += ["", f"Validation success by training iteration: {points}."]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: str | Path) -> None:
    """report.png: success per env with its 95% interval as error bars; with training, a second panel of
    learning curves (validation success per env with its interval, training rollout success dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = {name: entry for name, entry in report["envs"].items() if entry["metrics"] is not None}
    names = list(envs)
    trained = any(entry.get("curve") for entry in envs.values())
    fig, axes = plt.subplots(1, 2 if trained else 1, figsize=(11 if trained else 6, 4), squeeze=False)
    bars = axes[0][0]
    success = [envs[n]["metrics"]["success"] for n in names]
    low = [s - envs[n]["metrics"]["success_ci95_low"] for s, n in zip(success, names, strict=True)]
    high = [envs[n]["metrics"]["success_ci95_high"] - s for s, n in zip(success, names, strict=True)]
    bars.bar(names, success, yerr=[low, high], capsize=4, color="tab:blue")
    bars.set_ylim(0, 1)
    bars.set_ylabel("success (95% CI)")
    bars.set_title(f"{report['tasks']} {report['split']} tasks x {report['samples']} samples")
    bars.tick_params(axis="x", labelrotation=20)
    if trained:
        curves = axes[0][1]
        for index, name in enumerate(names):
            color = f"C{index}"
            curve = envs[name].get("curve") or []
            if curve:
                x = [p["iteration"] for p in curve]
                curves.plot(x, [p["success"] for p in curve], marker="o", color=color, label=name)
                curves.fill_between(
                    x,
                    [p["success_ci95_low"] for p in curve],
                    [p["success_ci95_high"] for p in curve],
                    color=color,
                    alpha=0.15,
                )
            training = envs[name].get("training") or []
            if training:
                curves.plot(
                    [p["iteration"] for p in training],
                    [p["rollout_success"] for p in training],
                    linestyle=":",
                    color=color,
                )
        curves.set_ylim(0, 1)
        curves.set_xlabel("training iteration")
        curves.set_ylabel("validation success (dotted: training rollouts)")
        curves.set_title("learning curves")
        curves.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(report: dict[str, Any], output: str | Path) -> list[Path]:
    """Writes report.md, report.json and report.png into ``output``; returns their paths."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    paths = [output / "report.md", output / "report.json", output / "report.png"]
    paths[0].write_text(markdown(report))
    write_json(paths[1], report)
    plot(report, paths[2])
    return paths
