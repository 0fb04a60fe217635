// Turn labels: the prompt a turn was opened for, the message describing what it did, and its
// external id. Labels come from prompts and agents, so they are neutralised before they are
// stored (and again when shown, for histories written before): a terminal escape sequence in a
// prompt must not retitle, recolour or garble the terminal of whoever runs `cpfs log`.
// Ids name one turn each: never a number (that is a turn number), never a range.
import { CpfsError } from '../errors.js'

// ESC-introduced sequences: CSI (ESC [ ... final), OSC / DCS / PM / APC / SOS (up to BEL or
// ST), and two-character escapes. The 8-bit CSI (0x9b) and OSC (0x9d) forms too.
// eslint-disable-next-line no-control-regex
const SEQUENCES = /\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|[\x1b][\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|[\x90\x9d\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -~]?/g
// Other C0 controls (tab and newline allowed where said), DEL and C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g

/**
 * A label as it may be stored: escape sequences removed, other control characters replaced by
 * U+FFFD, tabs made spaces; newlines kept only when `multiline`.
 */
export function neutralise (s: string, multiline = true): string {
  let out = String(s).replace(/\r\n/g, '\n').replace(SEQUENCES, '').replace(/\t/g, ' ').replace(CONTROLS, '\ufffd')
  if (!multiline) out = out.replace(/\r?\n/g, ' ')
  return out
}

/** For a terminal: one line, nothing the terminal would interpret. */
export function displayLine (s: string | null | undefined): string {
  if (s === null || s === undefined) return ''
  return neutralise(s, false).replace(/\n/g, ' ')
}

const MAX_ID = 200

/** Check an external id (given to cpfs turn --id, or by the hook); returns it trimmed. */
export function checkId (id: string): string {
  const s = String(id).trim()
  const why = s === ''
    ? 'is empty'
    : /^-?\d+$/.test(s)
      ? 'is a number, which would name a turn number instead (-N counts back from the head)'
      : s.includes('..')
        ? 'contains "..", which would read as a turn range'
        : neutralise(s, false) !== s || /\s/.test(s)
          ? 'contains spaces or control characters'
          : Buffer.byteLength(s) > MAX_ID
            ? `is longer than ${MAX_ID} bytes`
            : null
  if (why) throw new CpfsError('BAD_ID', `the turn id "${displayLine(s).slice(0, 60)}" ${why}`, 'use letters, digits and punctuation, e.g. --id msg_0142')
  return s
}
