/* The seed of corpus/elf/tiny.so and tiny32.so: the smallest file the loader takes for an xdev
 * plugin (the entry symbol, the name note "TINY", a build-id), never loaded by the tests. Built with
 *   gcc [-m32] -shared -nostdlib -fPIC -Os -s -Wl,-z,noseparate-code -Wl,-z,max-page-size=16 \
 *       -Wl,-z,norelro -Wl,--build-id=sha1 -o tiny.so tiny_plugin.c
 * (corpus/elf/entry_v2.so is the same without the note, exporting xdev_plugin_entry_v2 instead). */
const void* xdev_plugin_entry_v1 = 0;
__asm__(".pushsection .note.xdev.plugin,\"a\",@note\n"
        ".balign 4\n.long 5\n.long 5\n.long 1\n.asciz \"xdev\"\n.balign 4\n.asciz \"TINY\"\n.balign 4\n"
        ".popsection\n");
