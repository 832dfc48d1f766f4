/**
 * The system Chromium the browser test drives (playwright-core, which never downloads a browser): CHROMIUM_PATH, or
 * Debian's `chromium` package, installed here with apt-get when it is missing. A machine where that cannot happen
 * gets a named error saying why and what to do: the test fails, it is not skipped.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';

const exec = promisify(execFile);

class ChromiumUnavailable extends Error {
  override readonly name = 'ChromiumUnavailable';
}

/** Debian's package puts the browser here; /usr/bin/chromium is a shell wrapper around it. */
const DEBIAN_BINARIES = ['/usr/lib/chromium/chromium', '/usr/bin/chromium'];

const runnable = (file: string) => {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export async function ensureChromium(
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = console.log,
): Promise<string> {
  if (env.CHROMIUM_PATH) {
    if (runnable(env.CHROMIUM_PATH)) return env.CHROMIUM_PATH;
    throw new ChromiumUnavailable(`CHROMIUM_PATH=${env.CHROMIUM_PATH} is not an executable file`);
  }
  const found = DEBIAN_BINARIES.find(runnable);
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new ChromiumUnavailable(
      'no Chromium at /usr/lib/chromium/chromium and not root, so it cannot be installed here: run `sudo apt-get install -y chromium` ' +
        '(Debian) or set CHROMIUM_PATH to a Chromium or Chrome binary',
    );
  }
  if (!runnable('/usr/bin/apt-get'))
    throw new ChromiumUnavailable(
      'no Chromium and no apt-get to install it with: set CHROMIUM_PATH to a Chromium binary',
    );
  const install = () =>
    exec('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'chromium'], {
      env: { ...env, DEBIAN_FRONTEND: 'noninteractive' },
      maxBuffer: 64 * 1024 * 1024,
    });
  log('[chromium] installing Debian package chromium (apt-get, about a minute)');
  try {
    await install();
  } catch {
    // A fresh machine may have no package lists yet.
    try {
      await exec('apt-get', ['update', '-q'], {
        env: { ...env, DEBIAN_FRONTEND: 'noninteractive' },
        maxBuffer: 64 * 1024 * 1024,
      });
      await install();
    } catch (err) {
      throw new ChromiumUnavailable(
        `apt-get could not install chromium: ${(err as Error).message.split('\n').slice(-3).join(' ')}`,
        { cause: err },
      );
    }
  }
  const installed = DEBIAN_BINARIES.find(runnable);
  if (!installed)
    throw new ChromiumUnavailable('apt-get installed chromium, but no binary is at /usr/lib/chromium/chromium');
  return installed;
}
