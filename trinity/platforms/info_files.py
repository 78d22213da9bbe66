"""The `key=value` files vendor installers write (CANN's ascend_toolkit_install.info, the Ascend driver's version.info
and /etc/ascend_install.info): one value read from one file's text."""


def value_of(text: str, key: str) -> str | None:
    """The value of `key=value` among a file's lines, the key in any case; None where no line gives it a value."""
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip().lower() == key and value.strip():
            return value.strip()
    return None
