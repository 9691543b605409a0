"""The options `--help` shows of the CLI's configs and registries, as they were
when `python -m worldtrace.options` wrote this file (generated: do not edit; a test
checks it against the configs). Help reads them here, loading no config module."""

import json

SNAPSHOT = json.loads(
    r"""
{
 "options": {
  "worldtrace.collectors.importers:ImportConfig {\"include\": [\"max_observation_chars\", \"workers\"]}": [
   {
    "decls": [
     "--max-observation-chars",
     "max_observation_chars"
    ],
    "default": 1048576,
    "help": "Observations longer than this are cut to it (observation.truncated, counted); 0 = no cap.",
    "show_default": true,
    "type": "int"
   },
   {
    "decls": [
     "--workers",
     "workers"
    ],
    "default": 0,
    "help": "Processes converting the records (parse, map, redact, validate; a JSONL file's lines in batches, any other file whole): 1 = this one; 0 = auto, one per 4 MB of input, at most one per core; at most 4 per core (`config.WORKERS_PER_CORE`). Forked from this process, so only while no other thread runs in it. The shards are the same either way.",
    "show_default": true,
    "type": "int"
   }
  ],
  "worldtrace.collectors.scheduler:SchedulerConfig {}": [
   {
    "decls": [
     "--poll",
     "poll"
    ],
    "default": 30.0,
    "help": "Longest sleep in seconds between two looks at the schedules (new ones appear then); at most 3600.",
    "show_default": true,
    "type": "float"
   },
   {
    "decls": [
     "--grace",
     "grace"
    ],
    "default": 60.0,
    "help": "Seconds late a due run may still be enqueued under `missed: skip`; at most 31622400 (a year).",
    "show_default": true,
    "type": "float"
   }
  ],
  "worldtrace.collectors.worker:WorkerConfig {}": [
   {
    "decls": [
     "--concurrency",
     "concurrency"
    ],
    "default": 1,
    "help": "Attempts run at once, each in its own thread with its own sandboxes (at most 256).",
    "show_default": true,
    "type": "int"
   },
   {
    "decls": [
     "--lease",
     "lease"
    ],
    "default": 120.0,
    "help": "Seconds a claim stays valid without a heartbeat; after that (or as soon as its process is gone from this host) another worker ends the attempt as lost. At most 86400 (a day).",
    "show_default": true,
    "type": "float"
   },
   {
    "decls": [
     "--heartbeat",
     "heartbeat"
    ],
    "default": null,
    "help": "Seconds between heartbeats (leases renewed, lost attempts requeued, containers of dead workers removed); default a quarter of the lease. Shorter than the lease.",
    "show_default": true,
    "type": "float"
   },
   {
    "decls": [
     "--poll",
     "poll"
    ],
    "default": 2.0,
    "help": "Seconds between polls of the job store while nothing is claimable (at most 3600).",
    "show_default": true,
    "type": "float"
   },
   {
    "decls": [
     "--forever/--no-forever",
     "forever"
    ],
    "default": false,
    "help": "Keep polling when the queue is empty (else exit once nothing is queued or running).",
    "show_default": true,
    "type": "bool"
   }
  ],
  "worldtrace.pipelines.export:ExportConfig {\"choices\": {\"format\": \"worldtrace.pipelines.writers:FORMATS\", \"keep_mode\": \"worldtrace.pipelines.mask:KEEP_MODES\", \"overflow\": \"worldtrace.pipelines.samples:OVERFLOWS\", \"sample_mode\": \"worldtrace.pipelines.samples:SAMPLE_MODES\", \"sample_turns\": \"worldtrace.pipelines.samples:SAMPLE_TURNS\"}, \"exclude\": [\"input\", \"output\", \"tokenizer\", \"shard_rows\"], \"shown\": {\"seed\": \"the processing run's, else 0\"}}": [
   {
    "decls": [
     "--keep-mode",
     "keep_mode"
    ],
    "default": "turn",
    "help": "How a partial keep applies: whole turn by hash, per token, or a prefix.",
    "show_default": true,
    "type": {
     "registry": "worldtrace.pipelines.mask:KEEP_MODES"
    }
   },
   {
    "decls": [
     "--seed",
     "seed"
    ],
    "default": 0,
    "help": "Seeds every hash draw but the split's (--split-seed): keep decisions, per-token masks, the sampled turn. `worldtrace export` without it takes the processing run's (`process --set seed=N`, the draw the turns table's in_loss shows), else 0.",
    "show_default": "the processing run's, else 0",
    "type": "int"
   },
   {
    "decls": [
     "--eot-target/--no-eot-target",
     "eot_target"
    ],
    "default": true,
    "help": "The end-of-turn token closing an observation is a target too.",
    "show_default": true,
    "type": "bool"
   },
   {
    "decls": [
     "--template",
     "template"
    ],
    "default": "chatml",
    "help": "chatml, plain, a Jinja file rendering `messages` (a model's chat template), or a tokenizer_config.json holding one (its bos/eos tokens given to it as transformers does).",
    "show_default": true,
    "type": "str"
   },
   {
    "decls": [
     "--template-eot",
     "template_eot"
    ],
    "default": "",
    "help": "For a Jinja template: the end-of-turn text after an assistant message.",
    "show_default": false,
    "type": "str"
   },
   {
    "decls": [
     "--sample-mode",
     "sample_mode"
    ],
    "default": "trajectory",
    "help": "trajectory: one sample per trajectory; turn: one sample per target turn with its history.",
    "show_default": true,
    "type": {
     "registry": "worldtrace.pipelines.samples:SAMPLE_MODES"
    }
   },
   {
    "decls": [
     "--sample-turns",
     "sample_turns"
    ],
    "default": "all",
    "help": "With --sample-mode=turn: all target turns, or one random target turn per trajectory (seeded).",
    "show_default": true,
    "type": {
     "registry": "worldtrace.pipelines.samples:SAMPLE_TURNS"
    }
   },
   {
    "decls": [
     "--max-len",
     "max_len"
    ],
    "default": 0,
    "help": "Longest sample in tokens (0 = no limit; defaults to --seq-len when packing).",
    "show_default": true,
    "type": "int"
   },
   {
    "decls": [
     "--overflow",
     "overflow"
    ],
    "default": "split",
    "help": "Over --max-len: split at turn boundaries, or truncate.",
    "show_default": true,
    "type": {
     "registry": "worldtrace.pipelines.samples:OVERFLOWS"
    }
   },
   {
    "decls": [
     "--seq-len",
     "seq_len"
    ],
    "default": 0,
    "help": "Pack samples into rows of exactly this many tokens (best fit); 0 = no packing.",
    "show_default": true,
    "type": "int"
   },
   {
    "decls": [
     "--pack-window",
     "pack_window"
    ],
    "default": 4096,
    "help": "Packing buffer: best fit within each window of this many samples (bounds memory).",
    "show_default": true,
    "type": "int"
   },
   {
    "decls": [
     "--format",
     "format"
    ],
    "default": "parquet",
    "help": "parquet, megatron or agentworldbench (JSONL eval sets: no tokenizer, template, mask or length settings).",
    "show_default": true,
    "type": {
     "registry": "worldtrace.pipelines.writers:FORMATS"
    }
   },
   {
    "decls": [
     "--split",
     "split"
    ],
    "default": null,
    "help": "Hold out whole dedup clusters, e.g. test=0.02 (or test=0.02,valid=0.01; from Python also a mapping): each part goes to OUTPUT/<part>/ with its own manifest, the rest to OUTPUT/train/. Parts draw in the order given: a part added after the others leaves them as they were.",
    "show_default": true,
    "type": "str"
   },
   {
    "decls": [
     "--split-seed",
     "split_seed"
    ],
    "default": 0,
    "help": "Seed of the split's draw (which dedup clusters are held out); the mask seed does not move it, so exports of several mask draws hold out the same clusters.",
    "show_default": true,
    "type": "int"
   },
   {
    "decls": [
     "--where",
     "where"
    ],
    "default": null,
    "help": "Only the trajectories for which this DuckDB condition on the `trajectories` view's columns holds, e.g. \"domain = 'terminal'\" or \"outcome.status = 'success'\" (`worldtrace query --views` lists the columns).",
    "show_default": true,
    "type": "str"
   },
   {
    "decls": [
     "--simulation-instructions",
     "simulation_instructions"
    ],
    "default": null,
    "help": "YAML/JSON file mapping domain -> simulation instruction, or a directory of <domain>.md files; replaces worldtrace's own text for those domains.",
    "show_default": true,
    "type": "str"
   }
  ],
  "worldtrace.pipelines.process:ProcessConfig {\"choices\": {\"policy\": \"worldtrace.pipelines.mask:POLICIES\"}, \"exclude\": [\"output\", \"seed\", \"bytes_per_worker\"]}": [
   {
    "decls": [
     "--policy",
     "policy"
    ],
    "default": "agentworld-v1",
    "help": "Mask policy name (agentworld-v1, agentworld-v1+info).",
    "show_default": true,
    "type": {
     "registry": "worldtrace.pipelines.mask:POLICIES"
    }
   },
   {
    "decls": [
     "--rebuild/--no-rebuild",
     "rebuild"
    ],
    "default": false,
    "help": "Reprocess every input from scratch instead of only the raw files not seen before (needed after changing filters, dedup, policy or seed: earlier output used the old ones).",
    "show_default": true,
    "type": "bool"
   },
   {
    "decls": [
     "--runner",
     "runner"
    ],
    "default": "DirectRunner",
    "help": "Beam runner: DirectRunner, PortableRunner, FlinkRunner, SparkRunner, DataflowRunner (see infra/runners.md for the flags each needs).",
    "show_default": true,
    "type": "str"
   },
   {
    "decls": [
     "--workers",
     "workers"
    ],
    "default": 0,
    "help": "DirectRunner worker processes; 1 = in-process; 0 = auto: one per `bytes_per_worker` of new input, at most one per core, in-process below two workers' worth; at most 4 per core (`config.WORKERS_PER_CORE`).",
    "show_default": true,
    "type": "int"
   }
  ],
  "worldtrace.sandboxes.docker:DockerConfig {\"include\": [\"image\"]}": [
   {
    "decls": [
     "--image",
     "image"
    ],
    "default": "worldtrace/debian:latest",
    "help": "Any local image; the set-up builds worldtrace/debian and worldtrace/busybox.",
    "show_default": true,
    "type": "str"
   }
  ]
 },
 "registries": {
  "worldtrace.collectors.importers:FORMATS": [
   "openhands",
   "openhands-v1",
   "swe-agent",
   "mini-swe-agent",
   "atif",
   "gemini-cli",
   "codex",
   "agentworldbench",
   "sharegpt",
   "openai",
   "claude-code",
   "worldtrace"
  ],
  "worldtrace.pipelines.mask:KEEP_MODES": [
   "turn",
   "token",
   "prefix"
  ],
  "worldtrace.pipelines.mask:POLICIES": [
   "agentworld-v1",
   "agentworld-v1+info"
  ],
  "worldtrace.pipelines.samples:OVERFLOWS": [
   "split",
   "truncate"
  ],
  "worldtrace.pipelines.samples:SAMPLE_MODES": [
   "trajectory",
   "turn"
  ],
  "worldtrace.pipelines.samples:SAMPLE_TURNS": [
   "all",
   "one"
  ],
  "worldtrace.pipelines.writers:FORMATS": [
   "parquet",
   "megatron",
   "agentworldbench"
  ],
  "worldtrace.schemas.fields:DOMAINS": [
   "mcp",
   "search",
   "terminal",
   "swe",
   "android",
   "web",
   "os"
  ]
 }
}
"""
)
