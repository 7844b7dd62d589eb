/** Key bytes as a driver reads them back (a Buffer), as the stored key text. */
export function keyText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}
