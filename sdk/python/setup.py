"""Builds caravan-client: compiles Caravan's protos into the `caravan.v1` package.

The messages and gRPC stubs are not kept in the repository. Every build
(wheel, sdist, editable install) runs grpcio-tools' protoc over the repository's
`proto/` directory (or `CARAVAN_PROTO_DIR`) and writes `caravan/v1/*_pb2*.py`
next to the hand-written code. The protos live under `caravan/v1/`, so the
generated modules import each other as `caravan.v1.<name>_pb2`, which is this
package: no import rewriting is needed. An sdist carries the generated files,
so building from it needs no protos.
"""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

HERE = Path(__file__).resolve().parent
GENERATED = HERE / "caravan" / "v1"


def proto_dir():
    """The directory holding `caravan/v1/*.proto`, or None when absent."""
    candidates = [os.environ.get("CARAVAN_PROTO_DIR"), HERE.parent.parent / "proto"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "caravan" / "v1" / "api.proto").is_file():
            return Path(candidate)
    return None


def generate():
    """Compiles every Caravan proto into caravan/v1 (messages, stubs, type hints)."""
    source = proto_dir()
    if source is None:
        if (GENERATED / "api_pb2.py").is_file():
            return  # an sdist: generated when it was made
        raise SystemExit(
            "caravan-client: no protos found; build from the Caravan repository "
            "or set CARAVAN_PROTO_DIR to its proto/ directory"
        )
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    protos = sorted(str(p) for p in (source / "caravan" / "v1").glob("*.proto"))
    if GENERATED.exists():
        shutil.rmtree(GENERATED)
    GENERATED.mkdir(parents=True)
    out = str(HERE)
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{source}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *protos,
        ]
    )
    if code != 0:
        raise SystemExit(f"caravan-client: protoc failed ({code}) on {source}")
    (GENERATED / "__init__.py").write_text(
        '"""Caravan\'s messages and gRPC stubs, generated from proto/caravan/v1."""\n'
    )


class GeneratingEggInfo(egg_info):
    """Generates before the file list of the package is taken."""

    def run(self):
        generate()
        super().run()


class GeneratingBuildPy(build_py):
    """Generates before the modules are copied into the build."""

    def run(self):
        generate()
        super().run()


setup(cmdclass={"egg_info": GeneratingEggInfo, "build_py": GeneratingBuildPy})
