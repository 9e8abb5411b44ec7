/** Reading ids in tests. */

/** The millisecond a version 7 id was made at, or undefined when `id` is not one. */
export function madeAt(id: string): number | undefined {
  const hex = id.replaceAll('-', '');
  if (hex.length !== 32 || hex[12] !== '7' || !'89ab'.includes(hex[16]!)) return undefined;
  return parseInt(hex.slice(0, 12), 16);
}
