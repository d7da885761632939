"""`memvault ui`: the memory browser, served to this user's browser on 127.0.0.1."""

from __future__ import annotations

import click

from memvault.cli.context import current_client

__all__ = ["ui"]


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0,
              help="Listen on this port of 127.0.0.1 (default: a free one).")
@click.option("--no-browser", is_flag=True, help="Print the URL instead of opening a browser.")
def ui(port: int, no_browser: bool) -> None:
    """Browse, search and tend the vault in a web browser, on this machine only.

    The URL carries a one-time token: the first browser to open it gets the
    session; anyone else is refused. Ctrl-C stops the server.
    """
    # Imported here: starlette, uvicorn and Jinja2 cost ~0.2 s that no other
    # command needs.
    from memvault.ui.server import Browser

    client = current_client()
    client.status()  # fail now, with the usual message, if no daemon answers

    def announce(url: str) -> None:
        click.echo(url if no_browser else f"memvault ui: opening {url}", err=not no_browser)
        click.echo("Ctrl-C stops it.", err=True)

    try:
        Browser(client, port, open_browser=not no_browser).run(announce)
    except KeyboardInterrupt:
        pass  # a second Ctrl-C while the server winds down (`Browser.run`)
    except OSError as err:
        raise click.ClickException(f"cannot listen on 127.0.0.1:{port}: {err.strerror}") from None
