/**
 * How jobgate's own connections read column values: int8 (bigint) as a number, every other type
 * as pg reads it. The int8 columns here are ids, epochs and counters, far below 2^53.
 *
 * Given to each pool and client jobgate opens (pg's `types` option), and to each statement it
 * sends down a connection the caller owns (src/db/outer.ts), never set on pg's process-wide
 * table: an application that embeds jobgate keeps pg's defaults on its own connections (int8
 * read as a string), whatever it imports.
 */
import pg from 'pg';

const INT8 = pg.types.builtins.INT8;
const int8AsNumber = (value: string): number => Number(value);

export const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format: 'text' | 'binary' = 'text') =>
    oid === INT8 && format === 'text' ? int8AsNumber : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};
