"""Take the README's screenshots of the review inbox from a running stack, in headless Chromium.

    python scripts/screenshots.py [--var-dir var] [--token TOKEN] [--out docs]

It logs in (the token: `--token`, else the stack's development reviewer token), and saves the
list (`inbox.png`), the oldest waiting item's page (`item.png`) and the list at phone width
(`phone.png`). It changes nothing: it opens pages only (opening an item claims it, as it does
for any reviewer). Needs Debian's `chromium` and playwright (in the test requirements).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


async def shoot(url: str, token: str, out: Path) -> list[Path]:
    from playwright.async_api import async_playwright

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            for name, (width, height), mobile in (
                ("inbox.png", (1280, 640), False),
                ("phone.png", (390, 844), True),
            ):
                page = await browser.new_page(
                    viewport={"width": width, "height": height}, is_mobile=mobile
                )
                await page.goto(url + "/login")
                await page.fill("#token", token)
                await page.click("form.login button")
                await page.wait_for_url("**/inbox")
                await page.screenshot(path=str(out / name))
                saved.append(out / name)
                if name == "inbox.png":
                    first = page.locator("#items tbody tr[data-item] a").first
                    if await first.count():
                        await first.click()
                        await page.wait_for_url("**/items/**")
                        await page.set_viewport_size({"width": 1280, "height": 900})
                        await page.screenshot(path=str(out / "item.png"))
                        saved.append(out / "item.png")
                await page.close()
        finally:
            await browser.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--var-dir", type=Path, default=Path("var"))
    parser.add_argument("--token")
    parser.add_argument("--out", type=Path, default=Path("docs"))
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print("needs Debian's chromium package (/usr/bin/chromium)", file=sys.stderr)
        return 2
    try:
        state = json.loads((args.var_dir / "stack.json").read_text())
        url = state["services"]["inbox_api"]["url"]
        token = (
            args.token
            or json.loads((args.var_dir / "dev-credentials.json").read_text())["reviewer_token"]
        )
    except (OSError, ValueError, KeyError) as exc:
        print(
            f"no running stack under {args.var_dir} ({exc}); start one with `make run`",
            file=sys.stderr,
        )
        return 2
    for path in asyncio.run(shoot(url, token, args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
