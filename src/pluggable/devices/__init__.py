"""Floor 4: the StreamExecutor objects a plugin's platform provides — `platform`, `executor`,
the devices and their registry (`device`), `stream`, `event`, `timer`, device and host
memory (`memory`), the BFC allocator (`allocator`), the staging ring for small copies
(`staging`), the event manager that keeps memory alive until device work is done
(`event_manager`), and the lifetime shared by plugin handles (`handle`)."""
