/**
 * What a page shows, as the browser tests read it: every frame's text (the Web UI renders Markdown summaries in
 * frames), whitespace collapsed to single spaces.
 */
import type { Page } from 'playwright-core';

export async function visibleText(page: Page): Promise<string> {
  const texts = await Promise.all(
    page.frames().map((f) =>
      f
        .locator('body')
        .innerText()
        .catch(() => ''),
    ),
  );
  return texts.join(' ').replace(/\s+/g, ' ');
}
