"""`worldtrace android-sim`: the device simulator's command line.

Outside the `android_sim` package so that the CLI lists the command without importing
the simulator (it loads when the command runs).
"""

from __future__ import annotations

import click

DEFAULT_PORT = 15037
"""The simulator's adb server port: never adb's own 5037."""


@click.command(
    "android-sim",
    epilog="\b\nExample:\n  worldtrace android-sim --port 15037 --devices 2\n"
    "  worldtrace collect examples/android-notes.yaml   (in another shell)",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="IPv4 loopback address to listen on (127.0.0.1 or localhost).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="adb server port (0: any free one).",
)
@click.option(
    "--devices",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Number of simulated devices.",
)
@click.option("--no-ime", is_flag=True, help="Without the uiautomator2 keyboard app.")
@click.option("--preinstall-u2", is_flag=True, help="Boot with the client's u2.jar already pushed.")
@click.option(
    "--drop-after",
    type=click.IntRange(min=1),
    help="Unplug the device on this JSON-RPC call (1: the first).",
)
@click.option(
    "--offline-after",
    type=click.IntRange(min=1),
    help="Turn the device offline on this JSON-RPC call (1: the first).",
)
def command(host, port, devices, no_ime, preinstall_u2, drop_after, offline_after, **_) -> None:
    """Serve simulated Android devices behind an adb server on loopback (uiautomator2 and
    adb clients work against it unchanged) until Ctrl-C or SIGTERM; the first line printed
    is the address."""
    from .android_sim import DeviceConfig, SimConfig, serve, u2_jar

    dev = DeviceConfig(
        ime_installed=not no_ime,
        u2_jar=u2_jar() if preinstall_u2 else None,
        drop_after=drop_after,
        offline_after=offline_after,
    )
    try:
        serve(SimConfig(host, port, devices, dev))
    except ValueError as exc:  # not an IPv4 loopback address
        raise click.BadParameter(str(exc), param_hint="--host") from None
    except OSError as exc:  # the port is taken, the address is not this machine's
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
