#!/usr/bin/perl

# docs/ids.md names every requirement id the code and the tests use: each
# R-... id in src/, ngx_omniroute_module.c, fuzz/ and t/ (ranges such as
# R-CB-2..4 and lists such as R-CD-3/5 count every id they span) has a
# row of its own in docs/ids.md, which says what it means and where it
# lives.  The table's rows are unique and each says where the id lives.
# No nginx needed: a plain reading of the tree.

use strict;
use warnings;

use FindBin;
use File::Find;
use Test::More;

my $top = "$FindBin::Bin/..";
my $ids_md = "$top/docs/ids.md";

ok(-f $ids_md, 'docs/ids.md exists') or BAIL_OUT('no docs/ids.md');

# the ids a text uses, ranges and lists spelt out
sub ids_in {
    my ($text) = @_;
    my %ids;

    while ($text =~ /\bR-([A-Z]+)(?:-(\d+)((?:(?:\.\.|\/|,\s?)\d+)*))?/g) {
        my ($area, $first, $more) = ($1, $2, $3);

        if (!defined $first) {
            $ids{"R-$area"} = 1;
            next;
        }

        $ids{"R-$area-$first"} = 1;

        my $prev = $first;
        while ($more =~ /(\.\.|\/|,\s?)(\d+)/g) {
            my ($sep, $n) = ($1, $2);
            if ($sep eq '..') {
                $ids{"R-$area-$_"} = 1 for $prev + 1 .. $n;
            } else {
                $ids{"R-$area-$n"} = 1;
            }
            $prev = $n;
        }
    }

    return keys %ids;
}

# where each id is used: id -> { file => 1 }
my %used;

find({ no_chdir => 1, wanted => sub {
    my $f = $File::Find::name;
    if (-d $f) {
        $File::Find::prune = 1
            if $f =~ m{/t/(tmp|fixtures|sdk/node_modules)$};
        return;
    }
    return unless $f =~ /\.(c|h|t|pm|cjs|sh)$/;
    return if $f =~ m{/t/docs_ids\.t$};      # its own examples
    open(my $fh, '<', $f) or die "$f: $!";
    my $text = do { local $/; <$fh> };
    (my $rel = $f) =~ s{^\Q$top\E/}{};
    $used{$_}{$rel} = 1 for ids_in($text);
} }, map { "$top/$_" } qw(src fuzz t), 'ngx_omniroute_module.c');

ok(scalar(keys %used) > 50, 'the tree uses requirement ids ('
   . scalar(keys %used) . ')');

# the rows of docs/ids.md: "| `R-XX-N` | meaning | where |"
open(my $fh, '<', $ids_md) or die "$ids_md: $!";
my (%row, @dup, @nowhere);
while (my $line = <$fh>) {
    next unless $line =~ /^\|\s*`(R-[A-Z]+(?:-\d+)?)`\s*\|([^|]*)\|([^|]*)\|/;
    my ($id, $meaning, $where) = ($1, $2, $3);
    push @dup, $id if $row{$id}++;
    push @nowhere, $id if $meaning !~ /\w/ || $where !~ /\w/;
}
close $fh;

is_deeply(\@dup, [], 'each id has one row');
is_deeply(\@nowhere, [], 'each row says what the id means and where it lives');

my @missing = sort grep { !$row{$_} } keys %used;
is_deeply(\@missing, [], 'every id used in the tree has a row in docs/ids.md')
    or diag(join "\n", map {
        "$_ used in " . join(', ', sort keys %{$used{$_}})
    } @missing);

# the test can fail: an id nobody has documented is found
my @probe = ids_in('see R-ZZZ-7..9 and R-CD-3/5');
is(join(' ', sort @probe), 'R-CD-3 R-CD-5 R-ZZZ-7 R-ZZZ-8 R-ZZZ-9',
   'ranges and lists are spelt out');
ok(!$row{'R-ZZZ-8'}, 'an undocumented id would be reported');

done_testing;
