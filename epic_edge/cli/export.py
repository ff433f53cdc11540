"""`epic-edge export`: write a device bundle (models + manifest), or check one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from epic_edge.cli.common import human_bytes, parser, quiet_libraries
from epic_edge.profiles import list_profiles


def main(argv: list[str]) -> int:
    p = parser("export", "Export the embedder, tokenizer and learned decision a device profile "
                         "needs (and an LLM where the profile asks one for instructions) into "
                         "one folder with a manifest.json (sha256 and size of every file, model "
                         "facts, library versions), a README.md saying what runs on the device "
                         "and how an app calls it, an example app and the memory file format. "
                         "Copy the folder to the device and use it as the model folder "
                         "(--models DIR --profile DIR/profile.toml). Or check a copied bundle "
                         "with --check DIR.")
    p.add_argument("--device", help=f"device profile: {', '.join(list_profiles())}, or a .toml")
    p.add_argument("--out", type=Path, help="bundle folder to write")
    p.add_argument("--check", type=Path, metavar="DIR", help="verify a bundle's files and exit")
    p.add_argument("--no-int8", action="store_true",
                   help="skip the int8 ONNX embedder (unless the profile embeds with it)")
    p.add_argument("--qnn", action="store_true",
                   help="require the ExecuTorch QNN embedder (needs $QNN_SDK_ROOT)")
    p.add_argument("--force", action="store_true", help="replace a bundle of another profile")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    args = p.parse_args(argv)
    quiet_libraries()
    if args.check:
        from epic_edge.export.bundle import load_bundle

        bundle = load_bundle(args.check)
        print(f"ok: {args.check} is a {bundle.profile.name} bundle, "
              f"{len(bundle.manifest['files'])} files, {human_bytes(bundle.total_bytes)}, "
              "all sha256 match")
        return 0
    if not args.device or not args.out:
        p.error("--device and --out are required (or --check DIR)")
    from epic_edge.export.device_export import export_bundle

    def progress(text: str) -> None:
        print(f"[export] {text}", file=sys.stderr, flush=True)

    result = export_bundle(args.device, args.out, int8=not args.no_int8, qnn=args.qnn,
                           force=args.force, progress=progress)
    manifest = json.loads(result.manifest.read_text(encoding="utf-8"))
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    for step in result.steps:
        extra = f"{step['seconds']:.1f} s" if step["status"] == "done" else step["reason"]
        print(f"  {step['status']:>7}  {step['step']:<30} {extra}")
    total = sum(int(f["bytes"]) for f in manifest["files"].values())
    emb, llm = manifest["embedder"], manifest["llm"]
    print(f"bundle {result.root} for {manifest['profile']}: {len(manifest['files'])} files, "
          f"{human_bytes(total)}")
    print(f"  embedder {emb.get('name')} {emb.get('format')} {emb.get('precision')} "
          f"dim {emb.get('dim')} tau {emb.get('tau')}")
    if "int8" in emb:
        print(f"  int8 embedder agrees with fp32: min cosine {emb['int8']['min_cosine']:.4f}")
    if llm.get("decision_file"):
        print(f"  verifier decision {llm['decision_file']} ({llm.get('decision_format')})")
    if llm.get("file"):
        print(f"  instruction LLM {llm['file']} ({llm.get('format')}, {llm.get('quantisation')})")
    else:
        print("  no LLM (instructions from the template)")
    print(f"  {result.root / 'README.md'}: what runs on the device and how an app calls it")
    return 0
