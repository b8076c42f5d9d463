"""A build backend that refuses: the package is built from the repository's root."""

MESSAGE = ("baracuda_quant is built from the repository's root, not from its python/ folder: "
           "run `pip install .` in the root of the clone (where pyproject.toml builds the C library "
           "with meson), or `pip install <path to the clone>`")


def _refuse(*args, **kwargs):
    raise SystemExit(MESSAGE)


get_requires_for_build_wheel = get_requires_for_build_sdist = _refuse
prepare_metadata_for_build_wheel = build_wheel = build_sdist = _refuse
get_requires_for_build_editable = prepare_metadata_for_build_editable = build_editable = _refuse
